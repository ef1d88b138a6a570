"""Merge extracted entities by normalised name and relationships by (source, target).

Name policy: the merge key folds case, full/half width and whitespace (Chinese kept as written); the title
shown is the most frequent surface form (ties: the first in sorted order). Type policy: the most frequent
type among the mentions (ties: alphabetical). A relationship whose endpoint was never extracted as an entity
gets that endpoint added as an entity of unknown type (described by the relationship), so nothing is dropped;
self-loops are dropped and counted.
"""

from __future__ import annotations

import polars as pl

from graphrag_ray.exec.step import BatchStep, StepContext, Tables
from graphrag_ray.ids import content_id, normalize_name
from graphrag_ray.index.graph_rows import linked_graph


def most_common(mentions: pl.DataFrame, column: str) -> pl.DataFrame:
    """(key, column): each key's most frequent value of `column` (ties: the smallest value)."""
    return (
        mentions.group_by("key", column)
        .len()
        .sort(["key", "len", column], descending=[False, True, False])
        .group_by("key", maintain_order=True)
        .first()
        .select("key", column)
    )


class MergeGraph(BatchStep):
    name = "merge_graph"
    reads = ("extracted_entities", "extracted_relationships", "text_units")
    read_columns = {"text_units": ("id", "human_readable_id")}  # the mentions' order
    writes = ("merged_entities", "merged_relationships")

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        order = tables["text_units"].select(
            pl.col("id").alias("text_unit_id"), pl.col("human_readable_id").alias("unit_order")
        )
        ents = tables["extracted_entities"].join(order, on="text_unit_id", how="left")
        rels = tables["extracted_relationships"].join(order, on="text_unit_id", how="left")
        norm = lambda col: pl.col(col).map_elements(normalize_name, return_dtype=pl.String)  # noqa: E731
        ents = ents.with_columns(norm("title").alias("key")).filter(pl.col("key") != "")
        rels = rels.with_columns(norm("source").alias("skey"), norm("target").alias("tkey"))
        self.stat_update("self_loops_dropped", rels.filter(pl.col("skey") == pl.col("tkey")).height)
        rels = rels.filter((pl.col("skey") != pl.col("tkey")) & (pl.col("skey") != "") & (pl.col("tkey") != ""))

        # endpoints never extracted as entities become entities described by their relationships
        known = ents.select("key").unique()
        implied = (
            pl.concat(
                [
                    rels.select(
                        pl.col(key).alias("key"),
                        pl.col(end).alias("title"),
                        "description",
                        "text_unit_id",
                        "unit_order",
                        "order",
                    )
                    for key, end in (("skey", "source"), ("tkey", "target"))
                ]
            )
            .join(known, on="key", how="anti")
            .with_columns(pl.lit("").alias("type"))
        )
        ents = pl.concat(
            [
                ents.select("key", "title", "type", "description", "text_unit_id", "unit_order", "order"),
                implied.select("key", "title", "type", "description", "text_unit_id", "unit_order", "order"),
            ]
        )
        ents = ents.sort("unit_order", "order", "key")
        typed = ents.filter(pl.col("type") != "")
        types, titles = most_common(typed, "type"), most_common(ents, "title")
        merged_entities = (
            ents.group_by("key", maintain_order=True)
            .agg(
                pl.col("description")
                .filter(pl.col("description") != "")
                .unique(maintain_order=True)
                .alias("descriptions"),
                pl.col("text_unit_id").unique(maintain_order=True).alias("text_unit_ids"),
                # every type a mention gave it: entity resolution compares these, not just the majority
                pl.col("type").filter(pl.col("type") != "").unique().sort().alias("types"),
            )
            .join(titles, on="key")
            .join(types, on="key", how="left")
            .with_columns(
                pl.col("type").fill_null(""),
                pl.col("text_unit_ids").list.len().alias("frequency"),
                pl.col("key").map_elements(lambda k: content_id("entity", k), return_dtype=pl.String).alias("id"),
            )
        )
        # a relationship's weight adds up over text units; within one unit it counts once (the gleaning round
        # re-emits what the first pass found: 5 + 5 would be 10), its descriptions all kept
        weights = (
            rels.group_by("skey", "tkey", "text_unit_id")
            .agg(pl.col("weight").max())
            .group_by("skey", "tkey")
            .agg(pl.col("weight").sum())
        )
        merged_relationships = (
            rels.sort("unit_order", "order")
            .group_by("skey", "tkey", maintain_order=True)
            .agg(
                pl.col("description")
                .filter(pl.col("description") != "")
                .unique(maintain_order=True)
                .alias("descriptions"),
                pl.col("text_unit_id").unique(maintain_order=True).alias("text_unit_ids"),
            )
            .join(weights, on=["skey", "tkey"], how="left", maintain_order="left")
        )
        merged_entities, merged_relationships = linked_graph(merged_entities, merged_relationships, ctx)
        return {"merged_entities": merged_entities, "merged_relationships": merged_relationships}


STEP = MergeGraph()
