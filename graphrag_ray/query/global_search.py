"""Global search: map over community reports in token-budget batches, then exactly one reduce.

Every batch's map call is in flight at once - on a warm Ray actor when a cluster is up (jobs, eval) or in this
process for a quick CLI query (exec/pools.py either way) - bounded only by the shared rate limiter. Unparseable map output is asked
again once, then scored 0 and counted. Dynamic community selection rates reports from the root level down,
descending only into relevant communities.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import pickle

import polars as pl

from graphrag_ray.config.prompts import fill
from graphrag_ray.exec.pools import Pool, WorkerSpec, open_pool, shared_pool
from graphrag_ray.exec.runtime import choose_backend
from graphrag_ray.llm.ledger import UsageLedger, active_ledger, recording_into
from graphrag_ray.llm.models import Models
from graphrag_ray.parsing.llm_output import parse_json_object
from graphrag_ray.query.context.budget import pack_table
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.engine import Prepared, QueryEngine, system_and_user
from graphrag_ray.query.result import SearchResult

NO_DATA_ANSWER = "I am sorry but I am unable to answer this question given the provided data."
REPORT_COLUMNS = ["id", "title", "occurrence weight", "content", "rank"]


def parse_points(content: str) -> list[dict] | None:
    data = parse_json_object(content)
    if data is None or not isinstance(data.get("points"), list):
        return None
    points = []
    for p in data["points"]:
        if isinstance(p, dict) and "description" in p:
            try:
                score = float(p.get("score", 0))
            except (TypeError, ValueError):
                score = 0.0
            points.append({"description": str(p["description"]), "score": score})
    return points


async def map_call(chat, messages: list[dict], max_tokens: int, stage: str) -> tuple[list[dict], bool]:
    """One map call; an unparseable answer is asked again once (bypassing the cache), then scored 0."""
    answer = await chat.chat(messages, stage=stage, max_tokens=max_tokens, json_mode=True)
    points = parse_points(answer.content)
    if points is None:
        answer = await chat.chat(messages, stage=stage, max_tokens=max_tokens, json_mode=True, use_cache=False,
                                 temperature=0.1)
        points = parse_points(answer.content)
    return (points if points is not None else []), points is None


class MapWorker:
    """Runs map calls with its models: in this process for a quick query, or as a warm Ray actor (async, so every
    batch of a query is in flight at once) that later queries - an eval run's thousands - reuse."""

    def __init__(self, models: Models):
        self.models = models

    async def map(self, model_id: str, messages: list[dict], max_tokens: int, stage: str):
        with recording_into(UsageLedger()) as ledger:
            points, failed = await map_call(self.models.chat(model_id), messages, max_tokens, stage)
        return points, failed, ledger.to_dict()


class GlobalSearch(QueryEngine):
    method = "global"
    lookups = ("report_by_community", "community_rows")
    chat_model_key = "global_search"

    def __init__(self, *args, dynamic_community_selection: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.cfg = self.settings.global_search
        self.dynamic = dynamic_community_selection

    # -- which reports ---------------------------------------------------------------------------------
    async def select_reports(self, query: str) -> tuple[pl.DataFrame, dict]:
        if not self.dynamic:
            return self.data.reports_at_level(self.community_level), {}
        return await self._dynamic_selection(query)

    async def _dynamic_selection(self, query: str) -> tuple[pl.DataFrame, dict]:
        """Rate the root level's reports; descend into the children of relevant ones (children replace their
        parent), prune the rest; when nothing is relevant yet, fall back to the next level."""
        chat = self.chat(self.cfg.chat_model_id)
        template = self.prompt(self.cfg.rating_prompt)
        reports = self.data.report_by_community
        rows = self.data.community_rows
        frontier = sorted(c for c, row in rows.items() if row["level"] == 0 and c in reports)
        rated, kept, level = 0, set(), 0
        while frontier:
            ratings = await asyncio.gather(*(self._rate(chat, template, query, reports[c]) for c in frontier))
            rated += len(frontier)
            relevant = [c for c, r in zip(frontier, ratings) if r >= self.cfg.dynamic_threshold]
            for c in relevant:
                kept.discard(rows[c]["parent"])
            kept.update(relevant)
            if relevant:
                frontier = sorted(ch for c in relevant for ch in rows[c]["children"] if ch in reports) \
                    if level < self.cfg.dynamic_max_level else []
            elif not kept:
                frontier = sorted(c for c, row in rows.items() if row["level"] == level + 1 and c in reports)
            else:
                frontier = []
            level += 1
        selected = self.data.community_reports.filter(pl.col("community").is_in(sorted(kept)))
        return selected, {"dynamic_rated": rated, "dynamic_kept": selected.height}

    async def _rate(self, chat, template: str, query: str, report: dict) -> float:
        prompt = fill(template, question=query, report=report["full_content"])
        scores = []
        for repeat in range(self.cfg.dynamic_repeats):
            answer = await chat.chat([{"role": "user", "content": prompt}], stage="query_global_rating",
                                     json_mode=True, max_tokens=200, temperature=0.0 if repeat == 0 else 0.3)
            data = parse_json_object(answer.content) or {}
            try:
                scores.append(float(data.get("rating", 0)))
            except (TypeError, ValueError):
                scores.append(0.0)
        return sum(scores) / len(scores)

    # -- map -------------------------------------------------------------------------------------------
    def batches(self, reports: pl.DataFrame) -> list[tuple[str, list[dict]]]:
        """Reports, highest rank first, packed into batches of at most data_max_tokens."""
        count = self.chat(self.cfg.chat_model_id).tokenizer.count
        rows = sorted(reports.iter_rows(named=True), key=lambda r: (-(r["rank"] or 0), r["community"]))
        weight = self._occurrence(rows)
        out, i = [], 0
        while i < len(rows):
            text, kept = pack_table("Reports", REPORT_COLUMNS,
                                    [[r["human_readable_id"], r["title"], weight.get(r["community"], 0.0),
                                      r["full_content"], r["rank"]] for r in rows[i:]], count, self.cfg.data_max_tokens)
            kept = max(kept, 1)  # a report larger than the budget still gets its own batch
            if not text:
                text, _ = pack_table("Reports", REPORT_COLUMNS, [[rows[i]["human_readable_id"], rows[i]["title"], 0.0,
                                                                 rows[i]["full_content"], rows[i]["rank"]]],
                                     count, 10**9)
            out.append((text, rows[i:i + kept]))
            i += kept
        return out

    def _occurrence(self, rows: list[dict]) -> dict[int, float]:
        """Share of text units of each community (normalised), as Microsoft GraphRAG's occurrence weight."""
        counts = {r["community"]: len(self.data.community_rows[r["community"]]["text_unit_ids"] or [])
                  for r in rows if r["community"] in self.data.community_rows}
        top = max(counts.values(), default=1) or 1
        return {c: round(n / top, 3) for c, n in counts.items()}

    async def run_maps(self, query: str, batches: list[tuple[str, list[dict]]]) -> tuple[list[list[dict]], int]:
        template = self.prompt(self.cfg.map_prompt)
        messages = [system_and_user(fill(template, context_data=text), query) for text, _ in batches]
        pool = self._map_pool()
        outcomes = await asyncio.gather(*(pool.call("map", self.cfg.chat_model_id, m, self.cfg.map_max_length,
                                                    "query_global_map") for m in messages))
        ledger = active_ledger(self.models.ledger)
        for _, _, spent in outcomes:
            ledger.merge(spent)
        return [p for p, _, _ in outcomes], sum(1 for _, failed, _ in outcomes if failed)

    def _map_pool(self) -> Pool:
        """In this process: a worker over this engine's models. On Ray (a cluster to join, or executor: ray): a
        warm actor kept for the process's life, whose models share the job's limiter."""
        if choose_backend(self.cfg.executor) != "ray":
            return open_pool("local", WorkerSpec(MapWorker, (self.models,)), 1)
        from graphrag_ray.llm.ratelimit import RayRateLimiter

        limiter = self.models.limiter if isinstance(self.models.limiter, RayRateLimiter) \
            else RayRateLimiter.for_job(f"query-{os.getpid()}")
        models = Models.create(self.settings, str(self.root or "."), limiter=limiter, check_first=True)
        name = "map-worker-" + hashlib.sha256(pickle.dumps((self.settings, str(self.root)))).hexdigest()[:12]
        return shared_pool("ray", name, WorkerSpec(MapWorker, (models,), max_concurrency=1000, restartable=False))

    async def context_only(self, query: str, conversation_history: ConversationHistory | None = None) -> SearchResult:
        """The map batches that would be sent (no rating, map or reduce call)."""
        reports = self.data.reports_at_level(self.community_level)
        batches = self.batches(reports)
        text = "\n\n".join(f"=== map batch {i + 1} of {len(batches)} ===\n{t}" for i, (t, _) in enumerate(batches))
        records = {"reports": [{"id": r["human_readable_id"], "title": r["title"]} for _, rows in batches for r in rows]}
        return SearchResult("", records, text, method=self.method, details={"map_calls": len(batches)})

    # -- reduce ----------------------------------------------------------------------------------------
    def reduce_context(self, points_per_batch: list[list[dict]]) -> tuple[str, list[dict]]:
        count = self.chat(self.cfg.chat_model_id).tokenizer.count
        points = [{"analyst": i + 1, **p} for i, batch in enumerate(points_per_batch) for p in batch if p["score"] > 0]
        points.sort(key=lambda p: (-p["score"], p["analyst"]))
        text, used, kept = "", 0, []
        for p in points:
            block = f"----Analyst {p['analyst']}----\nImportance Score: {p['score']:g}\n{p['description']}\n\n"
            cost = count(block)
            if used + cost > self.cfg.reduce_max_tokens:
                break
            text += block
            used += cost
            kept.append(p)
        return text, kept

    async def prepare(self, query: str, history: ConversationHistory | None) -> Prepared:
        reports, selection = await self.select_reports(query)
        batches = self.batches(reports)
        points, unparsed = await self.run_maps(query, batches) if batches else ([], 0)
        report_data, kept = self.reduce_context(points)
        records = {"reports": [{"id": r["human_readable_id"], "title": r["title"]} for _, rows in batches
                               for r in rows], "points": kept}
        details = {"map_calls": len(batches), "map_unparsed": unparsed, "reports_used": reports.height, **selection}
        result = SearchResult("", records, report_data, method=self.method, details=details)
        if not kept:
            return Prepared(result, answer=NO_DATA_ANSWER)
        system = fill(self.prompt(self.cfg.reduce_prompt), report_data=report_data, response_type=self.response_type)
        if self.cfg.allow_general_knowledge:
            system += "\n" + self.prompt(self.cfg.knowledge_prompt)
        return Prepared(result, system_and_user(system, query), self.cfg.chat_model_id, self.cfg.reduce_max_length)
