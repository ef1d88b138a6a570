"""Embed the text units' text as soon as they exist. A background step: it runs beside extraction and the steps
after it, so the embedding model's limits are used while the chat model's are (against a provider whose limits
hold the run back, the embedding calls no longer add their own stretch of wall time at the end)."""

from __future__ import annotations

import polars as pl

from graphrag_ray.exec.step import SpilledRows, StepContext, Tables
from graphrag_ray.index.operations.embedding import EmbeddingStep


class EmbedTextUnits(EmbeddingStep):
    name = "embed_text_units"
    background = True
    reads = ("text_units",)
    writes = ("text_unit_embeddings",)

    def rows(self, tables: Tables) -> pl.DataFrame:
        return tables["text_units"].select(
            pl.col("id").alias("item_id"), pl.lit("text_unit_text").alias("target"), "text"
        )

    def finish_with(self, ctx: StepContext, tables: Tables, vectors: SpilledRows) -> Tables:
        return {"text_unit_embeddings": self.manifest(tables, vectors).sort("id")}


STEP = EmbedTextUnits()
