"""DRIFT search: a HyDE primer over community reports, follow-up local searches ranked by score, one reduce.

1. primer: a hypothetical answer (HyDE) is embedded and the most similar reports are given to the primer call,
   which returns an intermediate answer, a score and follow-up queries;
2. for n_depth rounds the highest-scoring open follow-ups (k_followups, never shuffled) are answered by local
   search, `concurrency` at a time; each answer brings a score and further follow-ups;
3. one reduce call over the intermediate answers, best first.
"""

from __future__ import annotations

import asyncio
import heapq
from itertools import count as counter

from graphrag_ray.config.prompts import fill
from graphrag_ray.parsing.llm_output import parse_json_object
from graphrag_ray.query.context.budget import pack_table
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.context.local_context import LOCAL_CONTEXT_LOOKUPS
from graphrag_ray.query.engine import Prepared, QueryEngine, system_and_user
from graphrag_ray.query.local import LocalSearch
from graphrag_ray.query.result import Accounting, SearchResult

HYDE_PROMPT = (
    "Write a short community report (a title and two paragraphs) that would answer this question, "
    "in the language of the question. Question: {query}"
)


def _score(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


class DriftSearch(QueryEngine):
    method = "drift"
    lookups = LOCAL_CONTEXT_LOOKUPS  # its follow-ups are local searches
    chat_model_key = "drift_search"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cfg = self.settings.drift_search
        self.local = LocalSearch(
            self.data,
            self.models,
            self.settings,
            self.root,
            self.response_type,
            self.community_level,
            max_context_tokens=self.cfg.local_max_context_tokens,
            no_llm=self.no_llm,
        )

    async def primer(self, query: str) -> tuple[dict, list[dict]]:
        chat = self.chat(self.cfg.chat_model_id)
        hyde = await chat.chat(
            [{"role": "user", "content": fill(HYDE_PROMPT, query=query)}], stage="query_drift", max_tokens=400
        )
        reports = []
        by_id = {r["id"]: r for r in self.data.report_by_community.values()}
        if self.data.vectors_dir is not None and by_id:
            vector = (await self.embed(self.cfg.embedding_model_id, [hyde.content]))[0]
            hits = self.data.nearest("community_full_content", len(by_id), vector, self.cfg.primer_top_k_reports)
            reports = [by_id[i] for i in hits or [] if i in by_id]
        if not reports:
            reports = sorted(by_id.values(), key=lambda r: -(r["rank"] or 0))[: self.cfg.primer_top_k_reports]
        text = "\n\n".join(r["full_content"] for r in reports)
        answer = await chat.chat(
            [
                {
                    "role": "user",
                    "content": fill(self.prompt(self.cfg.primer_prompt), query=query, community_reports=text),
                }
            ],
            stage="query_drift",
            json_mode=True,
        )
        data = parse_json_object(answer.content) or {}
        return data, reports

    async def follow_up(self, global_query: str, question: str) -> dict:
        context = await self.local.build_context(question)
        system = fill(self.prompt(self.cfg.local_prompt), context_data=context.text, global_query=global_query)
        answer = await self.chat(self.cfg.chat_model_id).chat(
            system_and_user(system, question), stage="query_drift", json_mode=True
        )
        data = parse_json_object(answer.content) or {}
        return {
            "query": question,
            "answer": str(data.get("response", answer.content)),
            "score": _score(data.get("score")),
            "follow_up_queries": [str(q) for q in data.get("follow_up_queries") or [] if str(q).strip()],
            "records": context.records,
        }

    async def context_only(self, query: str, conversation_history: ConversationHistory | None = None) -> SearchResult:
        """The local context of the query itself and the highest-ranked reports (no HyDE, primer or follow-up)."""
        with Accounting() as acc:
            local = await self.local.context_only(query, conversation_history)
        top = sorted(self.data.report_by_community.values(), key=lambda r: -(r["rank"] or 0))[
            : self.cfg.primer_top_k_reports
        ]
        count = self.chat(self.cfg.chat_model_id).tokenizer.count
        reports, _ = pack_table(
            "Primer Reports",
            ["id", "title", "content"],
            [[r["human_readable_id"], r["title"], r["full_content"]] for r in top],
            count,
            self.settings.local_search.max_context_tokens,
        )
        text = (
            f"=== primer: the {len(top)} highest-ranked reports (the primer call reads the reports nearest its "
            f"hypothetical answer) ===\n{reports}\n=== local context of the question (follow-ups each build "
            f"their own) ===\n{local.context_text}"
        )
        records = {
            **local.context_data,
            "primer_reports": [{"id": r["human_readable_id"], "title": r["title"]} for r in top],
        }
        return acc.fill(SearchResult("", records, text, method=self.method))

    async def prepare(self, query: str, history: ConversationHistory | None) -> Prepared:
        primer, reports = await self.primer(query)
        primer_score = _score(primer.get("score"))
        nodes = [
            {"query": query, "answer": str(primer.get("intermediate_answer", "")), "score": primer_score, "depth": 0}
        ]
        order = counter()
        queue: list = []
        asked = {query}
        for q in primer.get("follow_up_queries") or []:
            if str(q).strip() and str(q) not in asked:
                asked.add(str(q))
                heapq.heappush(queue, (-primer_score, next(order), str(q)))
        gate = asyncio.Semaphore(self.cfg.concurrency)

        async def answer(question: str) -> dict:
            async with gate:
                return await self.follow_up(query, question)

        records: dict[str, list] = {"reports": [{"id": r["human_readable_id"], "title": r["title"]} for r in reports]}
        for depth in range(1, self.cfg.n_depth + 1):
            round_queries = [heapq.heappop(queue)[2] for _ in range(min(self.cfg.k_followups, len(queue)))]
            if not round_queries:
                break
            for done in await asyncio.gather(*(answer(q) for q in round_queries)):
                nodes.append({**done, "depth": depth})
                for name, rows in done.pop("records").items():
                    records.setdefault(name, []).extend(rows)
                for q in done["follow_up_queries"]:
                    if q not in asked:
                        asked.add(q)
                        heapq.heappush(queue, (-done["score"], next(order), q))
        ranked = sorted(nodes, key=lambda n: (-n["score"], n["depth"]))
        count = self.chat(self.cfg.chat_model_id).tokenizer.count
        text, _ = pack_table(
            "Intermediate answers",
            ["query", "answer", "score"],
            [[n["query"], n["answer"], n["score"]] for n in ranked],
            count,
            self.settings.local_search.max_context_tokens,
        )
        result = SearchResult(
            "",
            records,
            text,
            method=self.method,
            details={
                "follow_ups": [{"query": n["query"], "score": n["score"], "depth": n["depth"]} for n in nodes[1:]],
                "primer_score": primer_score,
            },
        )
        system = fill(self.prompt(self.cfg.reduce_prompt), context_data=text, response_type=self.response_type)
        return Prepared(result, system_and_user(system, query), self.cfg.chat_model_id)
