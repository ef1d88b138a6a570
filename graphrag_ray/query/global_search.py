"""Global search: map over community reports in token-budget batches, then exactly one reduce.

Every batch's map call is in flight at once - on a warm Ray actor when a cluster is up (jobs, eval) or in this
process for a quick CLI query (exec/pools.py either way) - bounded only by the shared rate limiter. Unusable map
output is asked again once, then scored 0 and counted. Dynamic community selection rates reports from the root
level down, many per call, descending only into relevant communities until a token budget of them is found.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import polars as pl

from graphrag_ray.config.prompts import fill
from graphrag_ray.errors import ConfigError, UnusableAnswerError
from graphrag_ray.exec.pools import Pool, calls_pool
from graphrag_ray.llm.ledger import UsageLedger, active_ledger, recording_into
from graphrag_ray.llm.models import Models
from graphrag_ray.parsing.llm_output import parse_json_object
from graphrag_ray.query.context.budget import pack_batches
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.engine import Prepared, QueryEngine, system_and_user
from graphrag_ray.query.result import Accounting, SearchResult

log = logging.getLogger(__name__)
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


def parse_ratings(content: str) -> dict[int, float] | None:
    """{report id: rating 0-5} from a rating answer ({"ratings": {"<id>": rating}}; a report not listed is rated 0),
    or None when it is not one. A list of {"id", "rating"} objects is read too."""
    data = parse_json_object(content)
    ratings = data.get("ratings") if data is not None else None
    if isinstance(ratings, list):
        ratings = {item.get("id"): item.get("rating") for item in ratings if isinstance(item, dict)}
    if not isinstance(ratings, dict):
        return None
    out = {}
    for key, value in ratings.items():
        try:
            out[int(key)] = max(0.0, min(5.0, float(value)))
        except (TypeError, ValueError):
            continue
    return out


async def map_call(chat, messages: list[dict], max_tokens: int, stage: str) -> tuple[list[dict], str | None]:
    """One map call: (its points, why it was unusable or None). An answer without a list of points is asked again
    once, changed (ChatModel.chat); a second one scores the batch 0 and is counted - one batch never fails the
    question (all of them do: see GlobalSearch.prepare)."""
    try:
        answer = await chat.chat(
            messages,
            stage=stage,
            max_tokens=max_tokens,
            json_mode=True,
            validate=lambda content: parse_points(content) is not None,
        )
    except UnusableAnswerError as exc:
        log.info("a global search map answer was unusable: %s", exc)
        return [], str(exc)
    return parse_points(answer.content) or [], None


class MapWorker:
    """Runs map calls with its models: in this process for a quick query, or as a warm Ray actor (async, so every
    batch of a query is in flight at once) that later queries - an eval run's thousands - reuse."""

    def __init__(self, models: Models):
        self.models = models

    async def aclose(self) -> None:
        await self.models.aclose()

    async def map(self, model_id: str, messages: list[dict], max_tokens: int, stage: str):
        with recording_into(UsageLedger(), roll_up=False) as ledger:  # the caller merges what is returned
            points, failed = await map_call(self.models.chat(model_id), messages, max_tokens, stage)
        return points, failed, ledger.to_dict()

    async def rate(self, model_id: str, prompt: str, max_tokens: int, temperature: float, stage: str):
        """One rating call of dynamic selection: ({report id: rating}, unreadable, usage)."""
        with recording_into(UsageLedger(), roll_up=False) as ledger:  # the caller merges what is returned
            try:
                answer = await self.models.chat(model_id).chat(
                    [{"role": "user", "content": prompt}],
                    stage=stage,
                    json_mode=True,
                    max_tokens=max_tokens,
                    temperature=temperature,
                    validate=lambda content: parse_ratings(content) is not None,
                )
                scores = parse_ratings(answer.content) or {}
            except UnusableAnswerError:  # asked twice: its reports count as not relevant, and are counted
                scores = None
        return scores or {}, scores is None, ledger.to_dict()


@dataclass
class MapPoints:
    """What the map half of global search found in one index: the reports it read (records), each batch's
    points, why unusable map answers were unusable, and counts for the result's details."""

    reports: list[dict]
    points: list[list[dict]]
    unusable: list[str]
    details: dict = field(default_factory=dict)


class GlobalSearch(QueryEngine):
    method = "global"
    lookups = ("report_by_community", "community_rows")
    chat_model_key = "global_search"

    def __init__(self, *args, dynamic_community_selection: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.cfg = self.settings.global_search
        self.dynamic = dynamic_community_selection
        self._pool: Pool | None = None

    # -- which reports ---------------------------------------------------------------------------------
    async def select_reports(self, query: str) -> tuple[pl.DataFrame, dict]:
        if not self.dynamic:
            return self.data.reports_at_level(self.community_level), {}
        return await self._dynamic_selection(query)

    async def _dynamic_selection(self, query: str) -> tuple[pl.DataFrame, dict]:
        """Rate reports from the root level down - by title and summary, many per call, every call of a round at
        once on the map pool, a round rating the levels below too (dynamic_lookahead_levels) - and descend into
        the children of relevant ones (children replace their parent).
        Descending stops at dynamic_max_level or as soon as the relevant reports fill dynamic_budget_tokens (the
        best-rated within it are kept); when nothing is relevant yet, the next level is tried."""
        cfg, reports, rows = self.cfg, self.data.report_by_community, self.data.community_rows
        count = self.chat(cfg.chat_model_id).tokenizer.count
        size: dict[int, int] = {}

        def tokens(community: int) -> int:
            if community not in size:
                size[community] = count(reports[community]["full_content"])
            return size[community]

        frontier = sorted(c for c, row in rows.items() if row["level"] == 0 and c in reports)
        ratings: dict[int, float] = {}
        kept: set[int] = set()
        rated = calls = unparsed = level = 0
        while frontier:
            if any(c not in ratings for c in frontier):  # a new round: the frontier and the levels below it
                wave = self._with_descendants([c for c in frontier if c not in ratings], level)
                scores, made, failed = await self._rate(query, [reports[c] for c in wave])
                ratings.update({c: scores.get(c, 0.0) for c in wave})
                rated, calls, unparsed = rated + len(wave), calls + made, unparsed + failed
            relevant = [c for c in frontier if ratings.get(c, 0.0) >= cfg.dynamic_threshold]
            for c in relevant:
                kept.discard(rows[c]["parent"])
            kept.update(relevant)
            if relevant:
                if level >= cfg.dynamic_max_level or sum(tokens(c) for c in kept) >= cfg.dynamic_budget_tokens:
                    break
                frontier = sorted(ch for c in relevant for ch in rows[c]["children"] if ch in reports)
            elif not kept:
                frontier = sorted(c for c, row in rows.items() if row["level"] == level + 1 and c in reports)
            else:
                break
            level += 1
        chosen, used = [], 0
        for c in sorted(kept, key=lambda c: (-ratings.get(c, 0.0), -(reports[c]["rank"] or 0), c)):
            if chosen and used + tokens(c) > cfg.dynamic_budget_tokens:
                break
            chosen.append(c)
            used += tokens(c)
        selected = self.data.community_reports.filter(pl.col("community").is_in(sorted(chosen)))
        return selected, {
            "dynamic_rated": rated,
            "dynamic_calls": calls,
            "dynamic_unparsed": unparsed,
            "dynamic_kept": selected.height,
            "dynamic_relevant": len(kept),
        }

    def _with_descendants(self, communities: list[int], level: int) -> list[int]:
        """The communities and their descendants down to dynamic_lookahead_levels below them (never deeper than
        dynamic_max_level): rated in one round, so descending costs no further round trip - the selection is
        the same as rating level by level, and a report under an irrelevant parent is rated for nothing."""
        rows, reports = self.data.community_rows, self.data.report_by_community
        wave, layer = list(communities), list(communities)
        deepest = min(level + self.cfg.dynamic_lookahead_levels, self.cfg.dynamic_max_level)
        for _ in range(level + 1, deepest + 1):
            layer = [ch for c in layer for ch in rows[c]["children"] if ch in reports]
            wave += layer
        return sorted(set(wave))

    async def _rate(self, query: str, rows: list[dict]) -> tuple[dict[int, float], int, int]:
        """Ratings of `rows` (community -> mean rating over dynamic_repeats), the calls made, and how many
        answers could not be read (their reports count as not relevant)."""
        count = self.chat(self.cfg.chat_model_id).tokenizer.count
        template = self.prompt(self.cfg.rating_prompt)
        if "{reports}" not in template:  # an edited prompt that rates one report: batches need the placeholder
            raise ConfigError(
                f"{self.cfg.rating_prompt} has no {{reports}} placeholder: dynamic selection rates "
                "many reports per call - take the new default prompt (`graphrag-ray init` in an empty "
                "folder writes it)"
            )
        packed = pack_batches(
            "Reports",
            ["id", "title", "summary"],
            [[r["human_readable_id"], r["title"], r["summary"]] for r in rows],
            count,
            self.cfg.dynamic_batch_tokens,
            alone=lambda row: [row[0], row[1], ""],  # one report over the budget alone: its title rates it
        )
        batches = [(text, rows[start:end]) for text, start, end in packed]
        pool = self._map_pool()
        calls = [
            (fill(template, question=query, reports=text), 0.0 if repeat == 0 else 0.3, 8 * len(batch) + 64)
            for repeat in range(self.cfg.dynamic_repeats)
            for text, batch in batches
        ]
        outcomes = await asyncio.gather(
            *(
                pool.call("rate", self.cfg.chat_model_id, prompt, limit, temperature, "query_global_rating")
                for prompt, temperature, limit in calls
            )
        )
        ledger = active_ledger(self.models.ledger)
        by_hrid = {r["human_readable_id"]: r["community"] for r in rows}
        sums: dict[int, float] = {}
        for scores, _, spent in outcomes:
            ledger.merge(spent)
            for hrid, score in scores.items():
                if hrid in by_hrid:
                    sums[by_hrid[hrid]] = sums.get(by_hrid[hrid], 0.0) + score
        repeats = self.cfg.dynamic_repeats
        return (
            {c: total / repeats for c, total in sums.items()},
            len(calls),
            sum(1 for _, failed, _ in outcomes if failed),
        )

    # -- map -------------------------------------------------------------------------------------------
    def batches(self, reports: pl.DataFrame) -> list[tuple[str, list[dict]]]:
        """Reports, highest rank first, packed into batches of at most data_max_tokens."""
        count = self.chat(self.cfg.chat_model_id).tokenizer.count
        rows = sorted(reports.iter_rows(named=True), key=lambda r: (-(r["rank"] or 0), r["community"]))
        weight = self._occurrence(rows)
        table = [
            [
                self.cite(r["human_readable_id"]),
                r["title"],
                weight.get(r["community"], 0.0),
                r["full_content"],
                r["rank"],
            ]
            for r in rows
        ]
        # a report larger than the budget still gets its own batch
        return [
            (text, rows[start:end])
            for text, start, end in pack_batches("Reports", REPORT_COLUMNS, table, count, self.cfg.data_max_tokens)
        ]

    def report_records(self, batches: list[tuple[str, list[dict]]]) -> list[dict]:
        """The reports of the batches, as a result's records (cited ids)."""
        return [{"id": self.cite(r["human_readable_id"]), "title": r["title"]} for _, rows in batches for r in rows]

    def _occurrence(self, rows: list[dict]) -> dict[int, float]:
        """Share of text units of each community (normalised), as Microsoft GraphRAG's occurrence weight."""
        counts = {
            r["community"]: len(self.data.community_rows[r["community"]]["text_unit_ids"] or [])
            for r in rows
            if r["community"] in self.data.community_rows
        }
        top = max(counts.values(), default=1) or 1
        return {c: round(n / top, 3) for c, n in counts.items()}

    async def run_maps(self, query: str, batches: list[tuple[str, list[dict]]]) -> tuple[list[list[dict]], list[str]]:
        """Every batch's points, and why each unusable map answer was unusable."""
        template = self.prompt(self.cfg.map_prompt)
        messages = [
            system_and_user(fill(template, context_data=text, max_length=self.cfg.map_max_length), query)
            for text, _ in batches
        ]  # max_length: Microsoft GraphRAG's prompts ask for it
        pool = self._map_pool()
        outcomes = await asyncio.gather(
            *(
                pool.call("map", self.cfg.chat_model_id, m, self.cfg.map_max_length, "query_global_map")
                for m in messages
            )
        )
        ledger = active_ledger(self.models.ledger)
        for _, _, spent in outcomes:
            ledger.merge(spent)
        return [p for p, _, _ in outcomes], [why for _, why, _ in outcomes if why]

    def _map_pool(self) -> Pool:
        """The pool for this engine's map and rating calls (exec decides where: this process, or a warm actor)."""
        if self._pool is None:
            self._pool = calls_pool("map-worker", self.cfg.executor, MapWorker, self.models, self.settings, self.root)
        return self._pool

    async def context_only(self, query: str, conversation_history: ConversationHistory | None = None) -> SearchResult:
        """The map batches that would be sent (no map or reduce call). With dynamic selection, the reports it
        selects - its rating calls are made, since they decide the context."""
        with Accounting() as acc:
            reports, selection = await self.select_reports(query)
        batches = self.batches(reports)
        text = "\n\n".join(f"=== map batch {i + 1} of {len(batches)} ===\n{t}" for i, (t, _) in enumerate(batches))
        records = {"reports": self.report_records(batches)}
        return acc.fill(
            SearchResult(
                "",
                records,
                text,
                method=self.method,
                details={"map_calls": len(batches), "reports_used": reports.height, **selection},
            )
        )

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

    async def points(self, query: str) -> MapPoints:
        """The map half: the reports chosen, every batch's points, and why unusable answers were unusable."""
        reports, selection = await self.select_reports(query)
        batches = self.batches(reports)
        points, unusable = await self.run_maps(query, batches) if batches else ([], [])
        return MapPoints(self.report_records(batches), points, unusable, {"reports_used": reports.height, **selection})

    def answer_from(self, query: str, parts: list[MapPoints]) -> Prepared:
        """The reduce half, over the map points of one index or of several (query/multi.py): one reduce call."""
        points = [batch for part in parts for batch in part.points]
        unusable = [why for part in parts for why in part.unusable]
        if points and len(unusable) == len(points):
            raise UnusableAnswerError(
                f"global search: none of the {len(points)} map answers was usable, so there "
                f"is nothing to answer from (e.g. {unusable[0]})"
            )
        if unusable:
            log.info("global search: %d of %d map answers unusable (e.g. %s)", len(unusable), len(points), unusable[0])
        report_data, kept = self.reduce_context(points)
        records = {"reports": [r for part in parts for r in part.reports], "points": kept}
        details = {"map_calls": len(points), "map_unparsed": len(unusable)}
        for part in parts:
            for key, value in part.details.items():
                details[key] = details.get(key, 0) + value if isinstance(value, (int, float)) else value
        result = SearchResult("", records, report_data, method=self.method, details=details)
        if not kept:
            return Prepared(result, answer=NO_DATA_ANSWER)
        system = fill(
            self.prompt(self.cfg.reduce_prompt),
            report_data=report_data,
            response_type=self.response_type,
            max_length=self.cfg.reduce_max_length,
        )
        if self.cfg.allow_general_knowledge:
            system += "\n" + self.prompt(self.cfg.knowledge_prompt)
        return Prepared(result, system_and_user(system, query), self.cfg.chat_model_id, self.cfg.reduce_max_length)

    async def prepare(self, query: str, history: ConversationHistory | None) -> Prepared:
        return self.answer_from(query, [await self.points(query)])
