"""The chat model answering the conversation as it is, with no retrieval: what `serve` does for a chat front end's
background task (Open WebUI's title, tags, follow-ups) and for LightRAG's `/bypass` prefix. Not a search method:
served only when a request is recognised as one of those (serve/front_ends.py)."""

from __future__ import annotations

from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.engine import Prepared, QueryEngine
from graphrag_ray.query.result import SearchResult


class DirectAnswer(QueryEngine):
    method = "direct"
    chat_model_key = "local_search"  # the model the index answers its questions with

    async def prepare(self, query: str, history: ConversationHistory | None) -> Prepared:
        turns = [{"role": t.role.value, "content": t.content} for t in (history.turns if history else [])]
        section = getattr(self.settings, self.chat_model_key)
        return Prepared(
            SearchResult("", {}, "", method=self.method),
            [*turns, {"role": "user", "content": query}],
            section.chat_model_id,
        )

    async def extractive(self, query: str, history: ConversationHistory | None = None) -> SearchResult:
        """No chat model: nothing to answer a task with (the front end keeps its defaults)."""
        return SearchResult("", {}, "", method=self.method, details={"extractive": True})
