"""Embed entity `title:description` and report `full_content` in batches (index/operations/embedding.py), joined
with the text units' vectors (embed_text_units.py, which ran beside extraction); published into LanceDB."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from graphrag_ray.exec.step import SpilledRows, StepContext, Tables
from graphrag_ray.index.operations.embedding import EmbeddingStep, vector_batches
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.vectors import VECTOR_TABLES, write_vector_batches


class Embed(EmbeddingStep):
    name = "embed"
    reads = ("entities_summarized", "community_reports", "text_unit_embeddings")
    read_columns = {"entities_summarized": ("id", "title", "description"), "community_reports": ("id", "full_content")}
    writes = publishes = ("embeddings",)
    slow_imports = ("lancedb",)  # the vectors are published into LanceDB

    def estimate(self, corpus) -> list:
        """The vectors of text units (embed_text_units', counted here as one stage), entities and reports."""
        from graphrag_ray.index.estimate import embeddings_estimate

        return embeddings_estimate(corpus)

    def rows(self, tables: Tables) -> pl.DataFrame:
        # the text as f"{title}:{description}" wrote it (a missing value as "None"): vectors are carried by text
        as_written = [pl.col(c).cast(pl.String).fill_null("None") for c in ("title", "description")]
        entities = tables["entities_summarized"].select(
            pl.col("id").alias("item_id"),
            pl.lit("entity_description").alias("target"),
            pl.concat_str([as_written[0], pl.lit(":"), as_written[1]]).alias("text"),
        )
        reports = tables["community_reports"].select(
            pl.col("id").alias("item_id"),
            pl.lit("community_full_content").alias("target"),
            pl.col("full_content").cast(pl.String).alias("text"),
        )
        return pl.concat([entities, reports])

    def publish(self, ctx: StepContext, folder: Path, tables, run: Store) -> None:
        """The vectors into the version's lancedb tables, one target at a time, read from the run's partition
        files (the `embeddings` manifest says where each row's vector is)."""
        embeddings = tables.get("embeddings")
        if embeddings is None or not embeddings.height:
            return
        for target in VECTOR_TABLES:
            part = embeddings.filter(embeddings["target"] == target)
            if part.height:
                write_vector_batches(
                    folder / "lancedb",
                    target,
                    vector_batches(run, part),
                    part.height,
                    ctx.settings.embed_text.ann_index_rows,
                    ctx.settings.embed_text.ann_index,
                )

    def finish_with(self, ctx: StepContext, tables: Tables, vectors: SpilledRows) -> Tables:
        mine = self.manifest(tables, vectors)
        both = pl.concat([tables["text_unit_embeddings"], mine], how="diagonal_relaxed")
        return {"embeddings": both.sort("target", "id")}


STEP = Embed()
