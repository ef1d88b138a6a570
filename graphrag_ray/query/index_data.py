"""A loaded index: the tables (Polars), lookups the context builders need, and the LanceDB vectors."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from graphrag_ray.errors import GraphRagRayError, IndexDamagedError, IndexMissingError
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.msgraphrag_layout import check_readable
from graphrag_ray.storage.schemas import OPTIONAL_COLUMNS, SCHEMAS
from graphrag_ray.storage.tables import current_index, read_table
from graphrag_ray.storage.vectors import VECTOR_TABLES, open_searchable

QUERY_TABLES = ("text_units", "entities", "relationships", "communities", "community_reports")


def as_polars(df: Any, name: str) -> pl.DataFrame:
    if df is None:
        raise IndexMissingError(f"index table '{name}' was not given")
    if not isinstance(df, pl.DataFrame):
        try:
            df = pl.from_pandas(df)
        except (TypeError, ValueError) as exc:
            raise GraphRagRayError(f"table '{name}': expected a Polars or pandas DataFrame ({exc})") from None
    return with_optional_columns(df, name)


def with_optional_columns(df: pl.DataFrame, name: str) -> pl.DataFrame:
    """Our columns a table of Microsoft GraphRAG (or of an earlier version) lacks, as nulls."""
    optional = [c for c in OPTIONAL_COLUMNS.get(name, ()) if c not in df.columns]
    return df.with_columns(pl.lit(None, dtype=SCHEMAS[name][c]).alias(c) for c in optional) if optional else df


def checked_types(df: pl.DataFrame, name: str, folder: Store) -> pl.DataFrame:
    """The table with the columns queries read, in their types: a column missing, or of a type that does not
    convert (a writer's Int32 or large string does), is an error naming the file and the column."""
    df = with_optional_columns(df, name)
    missing = [c for c in SCHEMAS[name] if c not in df.columns]
    if missing:
        raise IndexMissingError(f"index table '{name}' at {folder} lacks columns: {', '.join(missing)}")
    for column, dtype in SCHEMAS[name].items():
        if df.schema[column] != dtype:
            try:
                df = df.with_columns(pl.col(column).cast(dtype, strict=True))
            except (pl.exceptions.PolarsError, TypeError, ValueError):
                raise IndexDamagedError(
                    f"index table {folder}/{name}.parquet: column '{column}' is {df.schema[column]}, {dtype} expected"
                ) from None
    return df


def read_index_tables(
    location: str | Path | Store, names: tuple[str, ...], given: bool = False
) -> tuple[Store, dict[str, pl.DataFrame]]:
    """The published index at `location` (an output folder or one version's folder) and its tables `names`, each
    checked against its schema; a missing index or table is an error naming it. `given`: the user named the
    location (`--data`), so a wrong path is the likelier mistake than an index never built."""
    folder = current_index(location)
    if folder is None or not folder.exists():
        if not given:
            raise IndexMissingError(f"no index at {location}: run `graphrag-ray index` first")
        there = location if isinstance(location, Store) else Store(location)
        raise IndexMissingError(
            f"--data {location}: "
            + (
                "holds no published index (give an output folder or one version's folder)"
                if there.exists()
                else "no such folder"
            )
        )
    check_readable(folder)  # a Microsoft GraphRAG layout too old to read: its version, not a missing table
    tables = {}
    for name in names:
        df = read_table(folder, name)
        if df is None:
            raise IndexMissingError(f"index at {folder} is incomplete: table '{name}' is missing")
        tables[name] = checked_types(df, name, folder)
    return folder, tables


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
    vector_search: dict = field(default_factory=dict)  # nprobes / refine_factor for indexed tables (embed_text)
    _vector_tables: dict = field(default_factory=dict, repr=False)
    _lexical: dict = field(default_factory=dict, repr=False)

    @classmethod
    def load(
        cls, location: str | Path, open_vectors: bool = True, vector_search: dict | None = None, given: bool = False
    ) -> IndexData:
        """From a published index: a folder, or an object-store URI (s3://..., gs://...) of an output."""
        folder, tables = read_index_tables(location, QUERY_TABLES, given)
        covariates = read_table(folder, "covariates")
        index = cls(
            **tables,
            vectors_dir=folder.child("lancedb"),
            folder=folder,
            covariates=checked_types(covariates, "covariates", folder) if covariates is not None else None,
            vector_search=vector_search or {},
        )
        for name in VECTOR_TABLES if open_vectors else ():  # with the index, as its tables: not in a query
            index.vectors(name)
        return index

    @classmethod
    def from_frames(
        cls,
        entities=None,
        communities=None,
        community_reports=None,
        text_units=None,
        relationships=None,
        covariates=None,
        vectors_dir: Store | str | Path | None = None,
    ) -> IndexData:
        def table(df, name):
            return as_polars(df, name) if df is not None else pl.DataFrame(schema=SCHEMAS[name])

        return cls(
            table(text_units, "text_units"),
            table(entities, "entities"),
            table(relationships, "relationships"),
            table(communities, "communities"),
            table(community_reports, "community_reports"),
            vectors_dir=Store(vectors_dir) if vectors_dir else None,
            covariates=as_polars(covariates, "covariates") if covariates is not None else None,
        )

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
        columns = ["id", "human_readable_id", "text", "n_tokens", "relationship_ids", "location"]
        return {r["id"]: r for r in self.text_units.select(columns).iter_rows(named=True)}

    @cached_property
    def entity_matcher(self):
        from graphrag_ray.query.context.entity_match import EntityMatcher

        return EntityMatcher(self.entity_rows, self.text_units.height)

    @cached_property
    def graph_walk(self):
        from graphrag_ray.query.context.graph_walk import GraphWalk

        return GraphWalk(self.entities, self.relationships, self.text_units)

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

    @cached_property
    def claims_by_subject(self) -> dict[str, list[dict]]:
        """Claims (covariates) by the entity they are about, in human-readable-id order (none: claims are off)."""
        out: dict[str, list[dict]] = {}
        if self.covariates is not None and self.covariates.height:
            for row in self.covariates.sort("human_readable_id").iter_rows(named=True):
                out.setdefault(row["subject_id"], []).append(row)
        return out

    def vectors(self, name: str, rows: int = 0):
        """The LanceDB table `name`, or None when there is none to read. `rows`: how many rows the index holds
        for it - a table missing although rows exist is an error (an index whose lancedb/ was lost), never a
        quieter answer. Opening never writes: a query leaves the published index as it was."""
        if name not in self._vector_tables:
            try:
                self._vector_tables[name] = (
                    open_searchable(self.vectors_dir, name, **self.vector_search) if self.vectors_dir else None
                )
            except GraphRagRayError as exc:  # damaged: said by the method that reads it, not by every query
                self._vector_tables[name] = exc
        table = self._vector_tables[name]
        if isinstance(table, GraphRagRayError):
            raise table
        if table is None and rows and self.vectors_dir is not None:
            raise IndexMissingError(
                f"index at {self.folder or self.vectors_dir}: vector table '{name}' is missing "
                f"({self.vectors_dir}/{name}.lance) although {rows:,} rows need it: "
                "rebuild the index with `graphrag-ray index`"
            )
        return table

    def lexical(self, name: str):
        """The BM25 index of table `name` (text_units, entities, community_reports): the published one, or - for
        an index published without it (Microsoft GraphRAG's, an older version, frames) - built here once."""
        from graphrag_ray.nlp.lexical import LEXICAL_DIR, LEXICAL_TABLES, LexicalIndex, joined

        if name not in self._lexical:
            folder = self.folder.local_tree(f"{LEXICAL_DIR}/{name}") if self.folder is not None else None
            if folder is not None and (folder / "ids.json").exists():
                self._lexical[name] = LexicalIndex.load(folder)
            else:
                table = getattr(self, name)
                self._lexical[name] = LexicalIndex.build(table["id"].to_list(), joined(table, LEXICAL_TABLES[name]))
        return self._lexical[name]

    def nearest(self, name: str, rows: int, vector: list[float], k: int) -> list[str] | None:
        """Ids of the k rows of vector table `name` nearest `vector` (cosine), best first; None when the index has
        no such table and needs none."""
        table = self.vectors(name, rows)
        if table is None:
            return None
        return table.nearest(vector, k)  # a table that fails while read names itself (storage/vectors.py)

    def reports_at_level(self, level: int) -> pl.DataFrame:
        """Microsoft GraphRAG's rule: for each entity, its deepest community at or below `level`; the reports
        of those communities."""
        if self.community_reports.height == 0:
            return self.community_reports
        nodes = (
            self.communities.filter(pl.col("level") <= level)
            .select("community", "level", "entity_ids")
            .explode("entity_ids")
            .sort("level", descending=True)
            .group_by("entity_ids", maintain_order=True)
            .first()
        )
        keep = nodes["community"].unique()
        return self.community_reports.filter(pl.col("community").is_in(keep.implode()))
