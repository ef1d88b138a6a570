"""Hybrid search: a local answer whose gaps are filled from a global pass, joined in one final answer."""

from __future__ import annotations

import asyncio

from graphrag_ray.config.prompts import fill
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.engine import Prepared, QueryEngine, system_and_user
from graphrag_ray.query.global_search import GlobalSearch
from graphrag_ray.query.local import LocalSearch
from graphrag_ray.query.result import Accounting, SearchResult


class HybridSearch(QueryEngine):
    method = "hybrid"
    chat_model_key = "global_search"

    def __init__(self, *args, dynamic_community_selection: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        common = dict(
            root=self.root, response_type=self.response_type, community_level=self.community_level, no_llm=self.no_llm
        )
        self.local = LocalSearch(self.data, self.models, self.settings, **common)
        self.global_ = GlobalSearch(
            self.data, self.models, self.settings, dynamic_community_selection=dynamic_community_selection, **common
        )

    async def context_only(self, query: str, conversation_history: ConversationHistory | None = None) -> SearchResult:
        with Accounting() as acc:
            local = await self.local.context_only(query, conversation_history)
            global_ = await self.global_.context_only(query)
        return acc.fill(
            SearchResult(
                "",
                {**local.context_data, **global_.context_data},
                f"=== local ===\n{local.context_text}\n\n=== global ===\n{global_.context_text}",
                method=self.method,
            )
        )

    async def prepare(self, query: str, history: ConversationHistory | None) -> Prepared:
        local, global_ = await asyncio.gather(self.local.search(query, history), self.global_.search(query))
        records = {
            **{f"local_{k}": v for k, v in local.context_data.items()},
            **{f"global_{k}": v for k, v in global_.context_data.items()},
        }
        system = fill(
            self.prompt(self.settings.query.hybrid_prompt),
            local_answer=local.response,
            global_answer=global_.response,
            response_type=self.response_type,
        )
        result = SearchResult(
            "",
            records,
            f"{local.context_text}\n\n{global_.context_text}",
            method=self.method,
            details={
                "local_answer": local.response,
                "global_answer": global_.response,
                "map_calls": global_.details.get("map_calls"),
            },
        )
        return Prepared(result, system_and_user(system, query), self.settings.global_search.chat_model_id)
