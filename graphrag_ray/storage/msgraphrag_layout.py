"""Microsoft GraphRAG's index layouts read as ours (their output folder given to `--data`), in one place:

- 3.x writes our layout's tables as they are (this project's tables follow its columns);
- 2.x: a text unit names its documents in a list (`document_ids`); its LanceDB tables are named
  `<container>-entity-description`, `<container>-community-full_content`, `<container>-text_unit-text`;
- 1.x: the tables are `create_final_<table>.parquet`; an entity's degree is in `create_final_nodes`, its frequency
  is how many text units it is in; communities and reports name their parent but not their children; a report's
  `rank_explanation` is our `rating_explanation`; text units as 2.x;
- 0.x (`create_final_entities` with `name`, not `title`; no `create_final_communities`) cannot be read as an
  index: said with the version found.
"""

from __future__ import annotations

import polars as pl

from graphrag_ray.errors import IndexDamagedError

LEGACY_PREFIX = "create_final_"  # 0.x and 1.x
VECTOR_NAMES = {  # ours -> theirs (2.x and 1.x, after the container name)
    "entity_description": "entity-description",
    "community_full_content": "community-full_content",
    "text_unit_text": "text_unit-text",
}


TOO_OLD = (
    "a Microsoft GraphRAG 0.x index (create_final_entities has `name`, not `title`): its layout predates 1.0 and is "
    "not read here; index the input again (graphrag >= 1.0, or graphrag-ray index)"
)


def check_readable(store) -> None:
    """A layout this module cannot read is said before any table is: with the version found and why."""
    if is_legacy_index(store) and version_found(store) == "0.x":
        raise IndexDamagedError(f"{store.location}: {TOO_OLD}")


def legacy_name(name: str) -> str:
    return f"{LEGACY_PREFIX}{name}"


def is_legacy_index(store) -> bool:
    return store.exists(f"{legacy_name('entities')}.parquet")


def their_vector_table(store, name: str) -> str | None:
    """Their LanceDB table holding our `name` (any container name), or None."""
    theirs = VECTOR_NAMES.get(name)
    if theirs is None or not store.is_dir():
        return None
    found = sorted(d.removesuffix(".lance") for d in store.list_dirs() if d.endswith(f"-{theirs}.lance"))
    return found[0] if found else None


def adapted(name: str, df: pl.DataFrame, read) -> pl.DataFrame:
    """`df` (their table `name`) with our columns; `read(name)` reads another of their tables (1.x's nodes)."""
    if name == "entities" and "name" in df.columns and "title" not in df.columns:
        raise IndexDamagedError(TOO_OLD)
    if name == "text_units":
        if "document_id" not in df.columns and "document_ids" in df.columns:
            df = df.with_columns(pl.col("document_ids").list.first().alias("document_id"))
        if "covariate_ids" not in df.columns:
            df = df.with_columns(pl.lit([], dtype=pl.List(pl.String)).alias("covariate_ids"))
    elif name == "entities":
        if "frequency" not in df.columns and "text_unit_ids" in df.columns:
            df = df.with_columns(pl.col("text_unit_ids").list.len().cast(pl.Int64).alias("frequency"))
        if "degree" not in df.columns:
            nodes = read("nodes")
            degree = (
                nodes.group_by("title").agg(pl.col("degree").max())
                if nodes is not None and "degree" in nodes.columns
                else pl.DataFrame(schema={"title": pl.String, "degree": pl.Int64})
            )
            df = df.join(degree, on="title", how="left", maintain_order="left").with_columns(
                pl.col("degree").fill_null(0).cast(pl.Int64)
            )
    elif name in ("communities", "community_reports"):
        if "rank_explanation" in df.columns and "rating_explanation" not in df.columns:
            df = df.rename({"rank_explanation": "rating_explanation"})
        if "children" not in df.columns and "parent" in df.columns:
            children = (
                df.filter(pl.col("parent") >= 0)
                .group_by("parent")
                .agg(pl.col("community").sort().alias("children"))
                .rename({"parent": "community"})
            )
            df = df.join(children, on="community", how="left", maintain_order="left").with_columns(
                pl.col("children").fill_null(pl.lit([], dtype=pl.List(pl.Int64)))
            )
    return df


def version_found(store) -> str:
    """Which Microsoft GraphRAG layout a folder holds, for messages: "1.x", "2.x", "3.x" or "0.x"."""
    if is_legacy_index(store):
        try:
            columns = pl.read_parquet_schema(store.local_path(f"{legacy_name('entities')}.parquet"))
        except Exception:  # noqa: BLE001 - an object store, or an unreadable file: the commoner layout
            return "1.x"
        return "0.x" if "name" in columns and "title" not in columns else "1.x"
    if store.exists("text_units.parquet"):
        try:
            columns = pl.read_parquet_schema(store.local_path("text_units.parquet"))
        except Exception:  # noqa: BLE001
            return "3.x"
        return "2.x" if "document_ids" in columns else "3.x"
    return "unknown"
