"""Basic search: the top-k text units - by BM25, by vector similarity, or both fused - packed in that order, one
answer call."""

from __future__ import annotations

from graphrag_ray.config.prompts import fill
from graphrag_ray.nlp.lexical import reciprocal_rank_fusion
from graphrag_ray.query.context.budget import pack_table, source_records, sources_table
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.engine import Prepared, QueryEngine, system_and_user
from graphrag_ray.query.result import SearchResult


class BasicSearch(QueryEngine):
    method = "basic"
    lookups = ("text_unit_rows",)
    chat_model_key = "basic_search"

    async def prepare(self, query: str, history: ConversationHistory | None) -> Prepared:
        cfg = self.settings.basic_search
        hits = await self.retrieve(query, cfg.k) if self.data.text_units.height else []
        units = [self.data.text_unit_rows[i] for i in hits if i in self.data.text_unit_rows]
        count = self.chat(cfg.chat_model_id).tokenizer.count
        text, kept = pack_table("Sources", *sources_table(units), count, cfg.max_context_tokens)
        records = {"sources": source_records(units[:kept])}
        system = fill(self.prompt(cfg.prompt), context_data=text, response_type=self.response_type)
        return Prepared(
            SearchResult("", records, text, method=self.method, details={"retriever": self.retriever}),
            system_and_user(system, query),
            cfg.chat_model_id,
        )

    @property
    def retriever(self) -> str:
        chosen = self.settings.basic_search.retriever
        if chosen != "auto":
            return chosen
        model_id = self.settings.basic_search.embedding_model_id
        offline = not self.models.usable(model_id) or self.settings.models[model_id].type == "local_embedding"
        return "lexical" if offline or self.data.vectors_dir is None else "hybrid"

    async def retrieve(self, query: str, k: int) -> list[str]:
        """Text unit ids, best first: BM25, vectors, or both fused by reciprocal rank."""
        rankings = []
        if self.retriever in ("lexical", "hybrid"):
            rankings.append([i for i, _ in self.data.lexical("text_units").search(query, k * 2)])
        if self.retriever in ("vector", "hybrid") and self.data.vectors_dir is not None:
            vector = (await self.embed(self.settings.basic_search.embedding_model_id, [query]))[0]
            rankings.append(self.data.nearest("text_unit_text", self.data.text_units.height, vector, k * 2) or [])
        return reciprocal_rank_fusion(rankings)[:k] if len(rankings) > 1 else (rankings[0][:k] if rankings else [])
