"""Chunk documents into token windows (index/operations/chunking.py), per document, on workers over document
partitions; an update keeps the text units of documents it already had."""

from __future__ import annotations

import polars as pl

from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables
from graphrag_ray.index.operations.chunking import documents_to_cut, text_units_of
from graphrag_ray.storage.schemas import RUN_SCHEMAS, conform


class Chunk(ItemStep):
    name = "chunk"
    settings_section = "chunks"
    reads = ("documents",)
    writes = ("text_units",)
    yields = {"text_units": RUN_SCHEMAS["text_unit_rows"]}

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> pl.DataFrame:
        reused = set(self._reused(ctx, tables)["document_id"].unique()) if ctx.previous is not None else set()
        return documents_to_cut(tables["documents"], reused)

    @staticmethod
    def _reused(ctx: StepContext, tables: Tables) -> pl.DataFrame:
        """An update: the previous version's text units of documents it already had (same id: same content, and
        the chunking settings cannot have changed), in this step's row shape - not cut again."""
        previous = ctx.previous_table("text_units")
        if previous is None:
            return pl.DataFrame(schema={**Chunk.yields["text_units"]})
        previous = conform(previous, "text_units")  # a version from before a column was added (location)
        order = tables["documents"].select(
            pl.col("id").alias("document_id"), pl.col("human_readable_id").alias("doc_order")
        )
        return (
            previous.join(order, on="document_id")
            .with_columns(
                pl.col("human_readable_id").rank("ordinal").over("document_id").cast(pl.Int64).alias("chunk_index")
            )
            .select(list(Chunk.yields["text_units"]))
        )

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        return {"text_units": text_units_of(ctx, item)}

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        units = yielded["text_units"]
        if ctx.previous is not None:
            units = pl.concat([units, self._reused(ctx, tables)], how="vertical_relaxed")
        units = units.sort(["doc_order", "chunk_index"])
        units = units.with_columns(pl.int_range(pl.len()).cast(pl.Int64).alias("human_readable_id"))
        return {"text_units": units.drop("doc_order", "chunk_index")}


STEP = Chunk()
