"""The last part of building the graph's rows, shared by the merge and by entity resolution: relationship endpoints'
titles and ids, degrees in the undirected simple graph, and human-readable numbers carried over from the version an
update starts from."""

from __future__ import annotations

import polars as pl

from graphrag_ray.exec.step import StepContext
from graphrag_ray.ids import content_id
from graphrag_ray.index.carry import with_carried_numbers


def degrees(rels: pl.DataFrame) -> pl.DataFrame:
    """Degree in the undirected simple graph (a pair linked both ways counts once)."""
    pairs = rels.select(
        pl.min_horizontal("skey", "tkey").alias("a"), pl.max_horizontal("skey", "tkey").alias("b")
    ).unique()
    ends = pl.concat([pairs.select(pl.col("a").alias("key")), pairs.select(pl.col("b").alias("key"))])
    return ends.group_by("key").len().rename({"len": "degree"})


def linked_graph(
    entities: pl.DataFrame, relationships: pl.DataFrame, ctx: StepContext
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`entities` (key, id, title, ...) and `relationships` (skey, tkey, ...) with source/target titles, ids, degree,
    combined_degree and human-readable numbers, sorted."""
    title_of = entities.select("key", "title")
    relationships = (
        relationships.join(title_of.rename({"key": "skey", "title": "source"}), on="skey")
        .join(title_of.rename({"key": "tkey", "title": "target"}), on="tkey")
        .with_columns(
            pl.struct("skey", "tkey")
            .map_elements(lambda s: content_id("relationship", s["skey"], s["tkey"]), return_dtype=pl.String)
            .alias("id")
        )
    )
    degree = degrees(relationships)
    entities = entities.join(degree, on="key", how="left").with_columns(pl.col("degree").fill_null(0).cast(pl.Int64))
    relationships = (
        relationships.join(degree.rename({"key": "skey", "degree": "sdeg"}), on="skey", how="left")
        .join(degree.rename({"key": "tkey", "degree": "tdeg"}), on="tkey", how="left")
        .with_columns(
            (pl.col("sdeg").fill_null(0) + pl.col("tdeg").fill_null(0)).cast(pl.Int64).alias("combined_degree")
        )
        .drop("sdeg", "tdeg")
    )
    entities = with_carried_numbers(entities.sort("title", "key"), ctx.previous_table("entities"))
    relationships = with_carried_numbers(
        relationships.sort("source", "target", "id"), ctx.previous_table("relationships")
    )
    return entities, relationships
