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

    def rows(self, tables: Tables) -> list[dict]:
        """Every row that gets a vector: (item_id, target, text)."""
        rows = []
        for r in tables["entities_summarized"].select("id", "title", "description").iter_rows(named=True):
            rows.append({"item_id": r["id"], "target": "entity_description",
                         "text": f"{r['title']}:{r['description']}"})
        for r in tables["community_reports"].select("id", "full_content").iter_rows(named=True):
            rows.append({"item_id": r["id"], "target": "community_full_content", "text": r["full_content"]})
        return rows

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        """One item per distinct text: a corpus repeats itself (boilerplate, quoted passages, the same document
        filed twice), and rows with the same text share one vector - sent once, however the partitions run."""
        if not ctx.settings.embed_text.enabled:
            return []
        seen: set[tuple[str, str]] = set()
        distinct = []
        for row in self.rows(tables):
            if (row["target"], row["text"]) not in seen:
                seen.add((row["target"], row["text"]))
                distinct.append(row)
        return distinct

    def vectors_for_every_row(self, tables: Tables, yielded: pl.DataFrame) -> pl.DataFrame:
        """The vectors of the distinct texts, given to every row with that text (a text whose embedding failed
        has a failures row and no vector)."""
        rows = pl.DataFrame(self.rows(tables), schema={"item_id": pl.String, "target": pl.String,
                                                       "text": pl.String})
        vectors = yielded.select("target", "text", "vector").unique(["target", "text"], keep="first")
        return (rows.rename({"item_id": "id"}).join(vectors, on=["target", "text"], how="inner")
                .select(list(EMBEDDING_ROWS)))

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
        mine = self.vectors_for_every_row(tables, yielded["embeddings"])
        both = pl.concat([tables["text_unit_embeddings"], mine], how="diagonal_relaxed")
        return {"embeddings": both.sort("target", "id")}


STEP = Embed()
