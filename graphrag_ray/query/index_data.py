"""A loaded index: the tables (Polars), lookups the context builders need, and the LanceDB vectors."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from graphrag_ray.errors import GraphRagRayError, IndexMissingError
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.schemas import SCHEMAS
from graphrag_ray.storage.tables import current_index, read_table
from graphrag_ray.storage.vectors import VECTOR_TABLES, open_vectors

QUERY_TABLES = ("text_units", "entities", "relationships", "communities", "community_reports")


def as_polars(df: Any, name: str) -> pl.DataFrame:
    if df is None:
        raise IndexMissingError(f"index table '{name}' was not given")
    if isinstance(df, pl.DataFrame):
        return df
    try:
        return pl.from_pandas(df)
    except (TypeError, ValueError) as exc:
        raise GraphRagRayError(f"table '{name}': expected a Polars or pandas DataFrame ({exc})") from None


@dataclass
class IndexData:
    text_units: pl.DataFrame
    entities: pl.DataFrame
    relationships: pl.DataFrame
    communities: pl.DataFrame
    community_reports: pl.DataFrame
    vectors_dir: Store | None = None
    folder: Store | None = None
    covariates: pl.DataFrame | None = None
    _vector_tables: dict = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, location: str | Path, open_vectors: bool = True) -> "IndexData":
        """From a published index: a folder, or an object-store URI (s3://..., gs://...) of an output."""
        folder = current_index(location)
        if folder is None or not folder.exists():
            raise IndexMissingError(f"no index at {location}: run `graphrag-ray index` first")
        tables = {}
        for name in QUERY_TABLES:
            df = read_table(folder, name)
            if df is None:
                raise IndexMissingError(f"index at {folder} is incomplete: table '{name}' is missing")
            missing = [c for c in SCHEMAS[name] if c not in df.columns]
            if missing:
                raise IndexMissingError(f"index table '{name}' at {folder} lacks columns: {', '.join(missing)}")
            tables[name] = df
        index = cls(**tables, vectors_dir=folder.child("lancedb"), folder=folder,
                    covariates=read_table(folder, "covariates"))
        for name in VECTOR_TABLES if open_vectors else ():  # with the index, as its tables: not in a query
            index.vectors(name)
        return index

    @classmethod
    def from_frames(cls, entities=None, communities=None, community_reports=None, text_units=None,
                    relationships=None, vectors_dir: Store | str | Path | None = None) -> "IndexData":
        def table(df, name):
            return as_polars(df, name) if df is not None else pl.DataFrame(schema=SCHEMAS[name])

        return cls(table(text_units, "text_units"), table(entities, "entities"),
                   table(relationships, "relationships"), table(communities, "communities"),
                   table(community_reports, "community_reports"),
                   vectors_dir=Store(vectors_dir) if vectors_dir else None)

    # -- lookups (built once, on first use) ------------------------------------------------------------
    @cached_property
    def max_level(self) -> int:
        return int(self.communities["level"].max()) if self.communities.height else 0

    @cached_property
    def entity_rows(self) -> dict[str, dict]:
        return {r["id"]: r for r in self.entities.iter_rows(named=True)}

    @cached_property
    def entity_by_title(self) -> dict[str, dict]:
        return {r["title"]: r for r in self.entity_rows.values()}

    @cached_property
    def relationship_rows(self) -> list[dict]:
        return list(self.relationships.iter_rows(named=True))

    @cached_property
    def relationships_by_title(self) -> dict[str, list[dict]]:
        adjacency: dict[str, list[dict]] = {}
        for rel in self.relationship_rows:
            adjacency.setdefault(rel["source"], []).append(rel)
            adjacency.setdefault(rel["target"], []).append(rel)
        return adjacency

    @cached_property
    def text_unit_rows(self) -> dict[str, dict]:
        return {r["id"]: r for r in self.text_units.select("id", "human_readable_id", "text", "n_tokens",
                                                          "relationship_ids").iter_rows(named=True)}

    @cached_property
    def report_by_community(self) -> dict[int, dict]:
        return {r["community"]: r for r in self.community_reports.iter_rows(named=True)}

    @cached_property
    def community_rows(self) -> dict[int, dict]:
        return {r["community"]: r for r in self.communities.iter_rows(named=True)}

    @cached_property
    def communities_of_entity(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for row in self.community_rows.values():
            for entity_id in row["entity_ids"]:
                out.setdefault(entity_id, []).append(row["community"])
        return out

    def vectors(self, name: str):
        if name not in self._vector_tables:
            self._vector_tables[name] = open_vectors(self.vectors_dir, name) if self.vectors_dir else None
        return self._vector_tables[name]

    def reports_at_level(self, level: int) -> pl.DataFrame:
        """Microsoft GraphRAG's rule: for each entity, its deepest community at or below `level`; the reports
        of those communities."""
        if self.community_reports.height == 0:
            return self.community_reports
        nodes = (self.communities.filter(pl.col("level") <= level).select("community", "level", "entity_ids")
                 .explode("entity_ids").sort("level", descending=True)
                 .group_by("entity_ids", maintain_order=True).first())
        keep = nodes["community"].unique()
        return self.community_reports.filter(pl.col("community").is_in(keep.implode()))
