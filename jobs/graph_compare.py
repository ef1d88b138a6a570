"""What a full index and an update of the same corpus must agree on (tests/integration/test_update*.py and
jobs/bench_update.py's round trip compare graphs with it)."""

from __future__ import annotations

import polars as pl

from graphrag_ray.index.operations.descriptions import SUMMARY_ROWS
from graphrag_ray.storage.tables import read_table


def comparable_graph(index) -> tuple[list, list]:
    """What a full index and an update of the same corpus must agree on, row by row (human-readable numbers
    aside): entities and relationships by title, type, mentions, weight and degree, a summarised one by the
    description set it stands for (what its summary was written from, and what it gained since and did not say
    yet) - an update words a revised summary differently from a fresh one."""
    summaries = read_table(index.child("carried/summarize_descriptions"), "summaries")
    if summaries is None:
        summaries = pl.DataFrame(schema=SUMMARY_ROWS)
    if "unsaid" not in summaries.columns:  # written before summaries could be kept
        summaries = summaries.with_columns(pl.lit([], dtype=pl.List(pl.String)).alias("unsaid"))
    described = summaries.select("id", pl.concat_list("sources", pl.col("unsaid").fill_null([])).alias("set"))
    said = pl.coalesce(pl.col("set").list.sort().list.join(" "), "description").alias("description")

    def rows(name: str, columns: list, order: list[str]) -> list:
        df = read_table(index, name).join(described, on="id", how="left")
        return (
            df.select(*[said if isinstance(c, str) and c == "description" else c for c in columns]).sort(order).rows()
        )

    return (
        rows(
            "entities",
            ["title", "type", "description", pl.col("text_unit_ids").list.sort(), "frequency", "degree"],
            ["title"],
        ),
        rows(
            "relationships",
            ["source", "target", "description", "weight", pl.col("text_unit_ids").list.sort()],
            ["source", "target"],
        ),
    )
