"""Basic search (vector RAG): the top-k text units by similarity, packed in that order, one answer call."""

from __future__ import annotations

from graphrag_ray.config.prompts import fill
from graphrag_ray.query.context.budget import pack_table
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.engine import Prepared, QueryEngine, system_and_user
from graphrag_ray.query.result import SearchResult


class BasicSearch(QueryEngine):
    method = "basic"
    lookups = ("text_unit_rows",)
    chat_model_key = "basic_search"

    async def prepare(self, query: str, history: ConversationHistory | None) -> Prepared:
        cfg = self.settings.basic_search
        units = []
        if self.data.vectors_dir is not None and self.data.text_units.height:
            vector = (await self.embed(cfg.embedding_model_id, [query]))[0]
            hits = self.data.nearest("text_unit_text", self.data.text_units.height, vector, cfg.k) or []
            units = [self.data.text_unit_rows[i] for i in hits if i in self.data.text_unit_rows]
        count = self.chat(cfg.chat_model_id).tokenizer.count
        text, kept = pack_table("Sources", ["id", "text"], [[u["human_readable_id"], u["text"]] for u in units],
                                count, cfg.max_context_tokens)
        records = {"sources": [{"id": u["human_readable_id"], "text": u["text"]} for u in units[:kept]]}
        system = fill(self.prompt(cfg.prompt), context_data=text, response_type=self.response_type)
        return Prepared(SearchResult("", records, text, method=self.method), system_and_user(system, query),
                        cfg.chat_model_id)
