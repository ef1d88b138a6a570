"""Entities' and relationships' descriptions made one: a summary where there is one, else the descriptions joined
(the LLM's summaries and the fast method's joined sentences end the same way)."""

from __future__ import annotations

import polars as pl

SUMMARY_ROWS = {"id": pl.String, "description": pl.String}


def with_summaries(entities: pl.DataFrame, relationships: pl.DataFrame,
                   summaries: pl.DataFrame | None = None) -> dict[str, pl.DataFrame]:
    """`entities_summarized` and `relationships_summarized`: each row's `description` is its summary (by id) or,
    with none, its `descriptions` joined by newlines."""
    summaries = pl.DataFrame(schema=SUMMARY_ROWS) if summaries is None else summaries

    def resolve(df: pl.DataFrame) -> pl.DataFrame:
        single = pl.col("descriptions").list.join("\n")
        return (df.join(summaries.rename({"description": "summary"}), on="id", how="left")
                .with_columns(pl.coalesce("summary", single).alias("description")).drop("summary"))

    return {"entities_summarized": resolve(entities), "relationships_summarized": resolve(relationships)}
