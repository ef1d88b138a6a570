"""Local search: entities matched to the query, their neighbourhood as a mixed context, one answer call."""

from __future__ import annotations

import logging

from graphrag_ray.config.prompts import fill
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.context.local_context import (
    LOCAL_CONTEXT_LOOKUPS,
    LocalContext,
    build_local_context,
    map_query_to_entities,
)
from graphrag_ray.query.engine import Prepared, QueryEngine, system_and_user
from graphrag_ray.query.result import SearchResult

log = logging.getLogger(__name__)


class LocalSearch(QueryEngine):
    method = "local"
    lookups = LOCAL_CONTEXT_LOOKUPS

    def __init__(
        self, *args, exclude_entities: set[str] | None = None, max_context_tokens: int | None = None, **kwargs
    ):
        super().__init__(*args, **kwargs)
        self.cfg = self.settings.local_search
        self.exclude_entities = exclude_entities or set()
        self.max_context_tokens = max_context_tokens

    async def build_context(self, query: str, history: ConversationHistory | None = None) -> LocalContext:
        previous = " ".join(history.user_questions()[-self.cfg.conversation_history_max_turns :]) if history else ""
        embedding = self.cfg.embedding_model_id
        if not self.models.usable(embedding):  # no key for it (an offline project): said, not silent
            log.warning("models.%s has no API key: matching entities by name only", embedding)
        selected = await map_query_to_entities(
            f"{previous}\n{query}".strip(),
            self.data,
            (lambda texts: self.embed(embedding, texts)) if self.models.usable(embedding) else None,
            self.cfg.top_k_entities,
            self.cfg.oversample,
            self.exclude_entities,
            self.cfg.ranking,
        )
        count = self.chat(self.cfg.chat_model_id).tokenizer.count
        return build_local_context(
            self.data,
            selected,
            self.cfg,
            count,
            history,
            self.max_context_tokens,
            self.community_level,
            query=f"{previous}\n{query}".strip(),
        )

    async def prepare(self, query: str, history: ConversationHistory | None) -> Prepared:
        return self.answer_request(await self.build_context(query, history), query)

    def answer_request(self, context, query: str) -> Prepared:
        """The answer's request from a local context (this index's, or several merged: query/multi.py): the system
        prompt over its tables, and the entities it matched."""
        system = fill(self.prompt(self.cfg.prompt), context_data=context.text, response_type=self.response_type)
        result = SearchResult(
            "",
            context.records,
            context.text,
            method=self.method,
            details={"entities_matched": [e["title"] for e in context.selected]},
        )
        return Prepared(result, system_and_user(system, query), self.cfg.chat_model_id, self.cfg.max_tokens)
