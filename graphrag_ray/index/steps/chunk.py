"""Chunk documents into token windows (tiktoken), per document, on Ray workers over document partitions.

Text-unit ids hash where the document comes from (its input id, or its file and row), the window's position and
its text: identical text in two documents never collides, and a window an edit did not touch keeps its id (what
`update` relies on). Windows are cut on token boundaries and decoded leniently, so a CJK character
split across a boundary is dropped from that edge rather than turned into a replacement character.
"""

from __future__ import annotations

import polars as pl

from graphrag_ray.ids import content_id, document_source
from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables
from graphrag_ray.llm.tokens import encoding_for_model, get_encoding


def chunk_encoding(ctx: StepContext) -> str:
    model = ctx.settings.model(ctx.settings.extract_graph.model_id)
    return ctx.settings.chunks.encoding or model.encoding or encoding_for_model(model.model)


def windows(tokens: list[int], size: int, overlap: int) -> list[tuple[int, int]]:
    step = max(1, size - overlap)
    spans, start = [], 0
    while start < len(tokens):
        spans.append((start, min(len(tokens), start + size)))
        if start + size >= len(tokens):
            break
        start += step
    return spans


class Chunk(ItemStep):
    name = "chunk"
    reads = ("documents",)
    writes = ("text_units",)
    yields = {"text_units": {"id": pl.String, "text": pl.String, "n_tokens": pl.Int64, "document_id": pl.String,
                              "doc_order": pl.Int64, "chunk_index": pl.Int64}}

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        reused = set(self._reused(ctx, tables)["document_id"].unique()) if ctx.previous is not None else set()
        return [{"item_id": row["id"], "text": row["text"], "order": row["human_readable_id"],
                 "source": document_source(row["raw_data"])}
                for row in tables["documents"].select("id", "text", "human_readable_id", "raw_data")
                .iter_rows(named=True) if row["id"] not in reused]

    @staticmethod
    def _reused(ctx: StepContext, tables: Tables) -> pl.DataFrame:
        """An update: the previous version's text units of documents it already had (same id: same content, and
        the chunking settings cannot have changed), in this step's row shape - not cut again."""
        previous = ctx.previous_table("text_units")
        if previous is None:
            return pl.DataFrame(schema={**Chunk.yields["text_units"]})
        order = tables["documents"].select(pl.col("id").alias("document_id"), pl.col("human_readable_id")
                                           .alias("doc_order"))
        return (previous.join(order, on="document_id")
                .with_columns(pl.col("human_readable_id").rank("ordinal").over("document_id").cast(pl.Int64)
                              .alias("chunk_index"))
                .select(list(Chunk.yields["text_units"])))

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        enc = get_encoding(chunk_encoding(ctx))
        cfg = ctx.settings.chunks
        tokens = enc.encode(item["text"], disallowed_special=())
        units = []
        for index, (start, end) in enumerate(windows(tokens, cfg.size, cfg.overlap)):
            text = enc.decode_bytes(tokens[start:end]).decode("utf-8", errors="ignore").strip()
            if not text:
                continue
            units.append({"id": content_id("text_unit", item["source"], index, text), "text": text,
                          "n_tokens": end - start, "document_id": item["item_id"], "doc_order": item["order"],
                          "chunk_index": index})
        return {"text_units": units}

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        units = yielded["text_units"]
        if ctx.previous is not None:
            units = pl.concat([units, self._reused(ctx, tables)], how="vertical_relaxed")
        units = units.sort(["doc_order", "chunk_index"])
        units = units.with_columns(pl.int_range(pl.len()).cast(pl.Int64).alias("human_readable_id"))
        return {"text_units": units.drop("doc_order", "chunk_index")}


STEP = Chunk()
