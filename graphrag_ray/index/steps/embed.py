"""Embed entity `title:description` and report `full_content` in batches, joined with the text units' vectors
(embed_text_units.py, which ran beside extraction)."""

from __future__ import annotations

import polars as pl

from graphrag_ray.errors import LLMUnavailableError
from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables

STAGE = "embed"
EMBEDDING_ROWS = {"id": pl.String, "target": pl.String, "text": pl.String, "vector": pl.List(pl.Float32)}


class Embed(ItemStep):
    name = "embed"
    uses_llm, settings_section = True, "embed_text"
    reads = ("entities_summarized", "community_reports", "text_unit_embeddings")
    writes = ("embeddings",)
    yields = {"embeddings": EMBEDDING_ROWS}
    partition_size = 256

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        if not ctx.settings.embed_text.enabled:
            return []
        items = []
        for r in tables["entities_summarized"].select("id", "title", "description").iter_rows(named=True):
            items.append({"item_id": r["id"], "target": "entity_description",
                          "text": f"{r['title']}:{r['description']}"})
        for r in tables["community_reports"].select("id", "full_content").iter_rows(named=True):
            items.append({"item_id": r["id"], "target": "community_full_content", "text": r["full_content"]})
        return items

    async def process_batch(self, ctx: StepContext, items: list[dict], models) -> Rows:
        embedder = models.embedding(ctx.settings.embed_text.model_id)
        try:
            vectors = await embedder.embed([it["text"] for it in items], stage=STAGE)
        except LLMUnavailableError as exc:
            return {"failures": [{"step": self.name, "item_id": it["item_id"], "source": it["target"],
                                  "reason": str(exc)} for it in items]}
        return {"embeddings": [{"id": it["item_id"], "target": it["target"], "text": it["text"], "vector": vec}
                               for it, vec in zip(items, vectors)]}

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        both = pl.concat([tables["text_unit_embeddings"], yielded["embeddings"]], how="diagonal_relaxed")
        return {"embeddings": both.sort("target", "id")}


STEP = Embed()
