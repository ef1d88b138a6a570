"""An index's graph as people look at it: entities with their community at every level, weighted relationships
between entity ids, and the communities with their reports. Read from the published index or any version."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from graphrag_ray.errors import IndexDamagedError, UsageError
from graphrag_ray.query.index_data import read_index_tables
from graphrag_ray.storage.location import Store

log = logging.getLogger(__name__)

GRAPH_TABLES = ("entities", "relationships", "communities", "community_reports")
NO_COMMUNITY = -1  # an entity outside every community of a level (Leiden leaves small components out deeper down)


def level_column(level: int) -> str:
    return f"community_level_{level}"


@dataclass
class IndexGraph:
    folder: Store
    nodes: pl.DataFrame  # entities + degree + community_level_<n> per level (NO_COMMUNITY where none)
    edges: pl.DataFrame  # relationships + source_id / target_id (entity ids)
    communities: pl.DataFrame
    reports: pl.DataFrame
    levels: list[int]

    @property
    def name(self) -> str:
        """`project · version` for a published version (…/PROJECT/output/versions/VERSION), else the folder."""
        parts = str(self.folder.location).rstrip("/").split("/")
        if len(parts) >= 4 and parts[-2] == "versions":
            return f"{parts[-4]} · {parts[-1]}"
        return parts[-1]

    def community_at(self, level: int | None) -> pl.Expr:
        """`level`'s community of each node (None: the top level); NO_COMMUNITY everywhere for an index with no
        communities (no relationships to cluster)."""
        level = self.chosen_level(level)
        return pl.lit(NO_COMMUNITY, pl.Int64) if level is None else pl.col(level_column(level))

    def chosen_level(self, level: int | None) -> int | None:
        """The rule `query --community-level` follows too: a level deeper than the index's deepest is the deepest
        (said on the log), a negative one is a usage mistake; None is the top level."""
        if level is not None and level < 0:
            raise UsageError(f"--level {level}: a level is 0 (the root) or deeper")
        if not self.levels:
            return None
        if level is None:
            return self.levels[0]
        if level > self.levels[-1]:
            log.warning(
                "community level %d is deeper than the index's deepest level (%d): using %d",
                level,
                self.levels[-1],
                self.levels[-1],
            )
            return self.levels[-1]
        return level


def load_graph(location: str | Path | Store, given: bool = False) -> IndexGraph:
    """The graph of the index at `location`: an output folder (its published version) or one version's folder."""
    folder, tables = read_index_tables(location, GRAPH_TABLES, given)
    entities, communities = tables["entities"], tables["communities"]
    levels = sorted(communities["level"].unique().to_list()) if communities.height else []
    nodes = entities.sort("id")
    if communities.height:
        membership = (
            communities.select("level", "community", pl.col("entity_ids").alias("id"))
            .explode("id")
            .drop_nulls("id")
            .group_by("id", "level")
            .agg(pl.col("community").min())
            .pivot(on="level", index="id", values="community", sort_columns=True)
        )
        membership = membership.rename({str(level): level_column(level) for level in levels})
        nodes = nodes.join(membership, on="id", how="left")
    nodes = nodes.with_columns(
        *(pl.col(level_column(level)).fill_null(NO_COMMUNITY).cast(pl.Int64) for level in levels)
    )
    ids = dict(zip(entities["title"].to_list(), entities["id"].to_list()))
    edges = (
        tables["relationships"]
        .sort("id")
        .with_columns(
            pl.col("source").replace_strict(ids, default=None).alias("source_id"),
            pl.col("target").replace_strict(ids, default=None).alias("target_id"),
        )
    )
    dangling = edges.filter(pl.col("source_id").is_null() | pl.col("target_id").is_null())
    if dangling.height:  # merge_graph never writes one: an index edited by hand or by another tool
        example = dangling.row(0, named=True)
        raise IndexDamagedError(
            f"index at {folder}: {dangling.height} relationships name an entity the entities "
            f"table lacks (e.g. {example['source']!r} -> {example['target']!r})"
        )
    return IndexGraph(
        folder,
        nodes,
        edges,
        communities.sort("level", "community"),
        tables["community_reports"].sort("level", "community"),
        levels,
    )
