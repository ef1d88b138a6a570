"""Parquet tables with Polars on a Store (local or object storage): atomic writes, hive partitions for large
tables, and the one publish scheme.

Writers write to a hidden temp name (`.name.tmp-*`) and rename, or PUT one object; readers skip `.`/`_` names, so
a crash never leaves a half-written table visible.

Publishing (the same in a folder and in a bucket): an index is built in a hidden staging folder, becomes
`OUTPUT/versions/<version>/`, and is then made current by rewriting the one small `OUTPUT/CURRENT` file that
names it (a rename locally, a single PUT in an object store). Readers resolve CURRENT, so they see the old index or
the new one, never a mix; older versions are pruned after the switch.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import polars as pl

from graphrag_ray.errors import IndexDamagedError
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.msgraphrag_layout import adapted, is_legacy_index, legacy_name
from graphrag_ray.storage.schemas import SCHEMAS, SORT_KEYS, conform

PART_COLUMN = "part"
CURRENT_POINTER = "CURRENT"  # names the published version
VERSIONS_DIR = "versions"
HIDDEN = [".", "_"]
T = TypeVar("T")


def write_table(
    df: pl.DataFrame | pl.LazyFrame,
    where: Store | str | Path,
    name: str,
    partition_rows: int | None = None,
    schema_name: str | None = None,
    typed: bool = True,
) -> None:
    """Write `name` into `where` atomically. A published table (typed) gets exactly its schema's columns,
    types and sort order; intermediate tables (typed=False) are written as they are. A LazyFrame is collected
    here: a step's tables that scan the run's files are held one at a time, as each is written."""
    store = Store(where)
    if isinstance(df, pl.LazyFrame):
        df = df.collect()
    known = (schema_name or (name if name in SCHEMAS else None)) if typed else None
    if known:
        df = conform(df, known).sort(SORT_KEYS[known], nulls_last=True, maintain_order=True)
    partitioned = bool(partition_rows and df.height > partition_rows)
    if partitioned:
        buckets = max(2, -(-df.height // partition_rows))
        df = df.with_columns((pl.col("id").hash(seed=0) % buckets).cast(pl.Int32).alias(PART_COLUMN))
    options = {"row_group_size": _row_group_rows(df)}
    folder = store.local_path()
    if folder is None:  # an object store: one PUT per file
        if partitioned:
            store.delete_tree(name)
            with tempfile.TemporaryDirectory() as tmp:
                df.write_parquet(Path(tmp) / name, partition_by=PART_COLUMN, mkdir=True, **options)
                store.upload_tree(Path(tmp) / name, name)
        else:
            buffer = io.BytesIO()
            df.write_parquet(buffer, **options)
            store.write_bytes(f"{name}.parquet", buffer.getvalue())
        return
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.tmp-{uuid.uuid4().hex[:8]}"
    if partitioned:
        df.write_parquet(tmp, partition_by=PART_COLUMN, mkdir=True, **options)
        target, other = folder / name, folder / f"{name}.parquet"
    else:
        df.write_parquet(tmp, **options)
        target, other = folder / f"{name}.parquet", folder / name
    _remove(other)
    if target.is_dir():
        _remove(target)
    os.replace(tmp, target)


ROW_GROUP_BYTES = 32 * 2**20


def _row_group_rows(df: pl.DataFrame) -> int:
    """Rows per parquet row group, about ROW_GROUP_BYTES each: the writer holds a row group encoded at once (a
    100M-token index's text units in polars' default 262k-row group took 0.4 GB more to write; ~0.1 GB so)."""
    size = df.estimated_size()
    return max(1024, int(df.height * ROW_GROUP_BYTES / size)) if size > ROW_GROUP_BYTES else max(1, df.height)


# tables a Microsoft GraphRAG index may hold in another shape (storage/msgraphrag_layout.py)
QUERY_ADAPTED = ("text_units", "entities", "communities", "community_reports", "covariates")


def read_table(where: Store | str | Path, name: str, columns: list[str] | None = None) -> pl.DataFrame | None:
    """`name.parquet`, or the hive-partitioned files below `name/`; None when neither exists. A file that cannot
    be read (truncated, not parquet) is an error naming it. `columns`: only those (a local file reads no other)."""
    store = Store(where)
    try:
        if columns is not None:
            local = store.local_path()
            if local is not None and (local / f"{name}.parquet").exists():
                return pl.read_parquet(local / f"{name}.parquet", columns=list(columns))
            found = _read_table(store, name)
            return found.select(columns) if found is not None else None
        return _read_table(store, name)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise IndexDamagedError(
            f"index table {store.location}/{name}.parquet cannot be read ({first}): "
            "rebuild the index or query another version (`graphrag-ray versions`)"
        ) from None


def table_file(where: Store | str | Path, name: str) -> Path | None:
    """The one local file holding `name` (`name.parquet`), for a reader that opens files itself (Ray Data); None
    when the table is partitioned, in an object store, or absent - read it with read_table then."""
    folder = Store(where).local_path()
    return folder / f"{name}.parquet" if folder is not None and (folder / f"{name}.parquet").exists() else None


def scan_table(where: Store | str | Path, name: str) -> pl.LazyFrame | None:
    """`name` as a LazyFrame scanning its file(s) (read when collected); None when it does not exist. A table in an
    object store is read now."""
    store = Store(where)
    folder = store.local_path()
    if folder is None:
        found = read_table(store, name)
        return found.lazy() if found is not None else None
    if (folder / f"{name}.parquet").exists():
        return pl.scan_parquet(folder / f"{name}.parquet")
    if (folder / name).is_dir():
        scan = pl.scan_parquet(folder / name, hive_partitioning=True, hidden_file_prefix=HIDDEN)
        scan = scan.drop(PART_COLUMN, strict=False)  # as _joined reads it back whole
        return scan.sort(SORT_KEYS[name], nulls_last=True) if name in SORT_KEYS else scan
    return None


def _read_table(store: Store, name: str) -> pl.DataFrame | None:
    found = _read_ours(store, name)
    if found is None and is_legacy_index(store):  # Microsoft GraphRAG 1.x: create_final_<name>.parquet
        found = _read_ours(store, legacy_name(name))
    if found is not None and name in QUERY_ADAPTED:  # their 1.x / 2.x columns, as ours
        found = adapted(name, found, lambda other: _read_ours(store, legacy_name(other)))
    return found


def _read_ours(store: Store, name: str) -> pl.DataFrame | None:
    folder = store.local_path()
    if folder is not None:
        if (folder / f"{name}.parquet").exists():
            return pl.read_parquet(folder / f"{name}.parquet")
        if not (folder / name).is_dir():
            return None
        return _joined(
            pl.scan_parquet(folder / name, hive_partitioning=True, hidden_file_prefix=HIDDEN).collect(), name
        )
    data = store.read_bytes(f"{name}.parquet")
    if data is not None:
        return pl.read_parquet(io.BytesIO(data))
    parts = [
        pl.read_parquet(io.BytesIO(store.read_bytes(f"{name}/{f.relative}")))
        for f in store.child(name).list_files("*.parquet")
    ]
    return _joined(pl.concat(parts, how="vertical_relaxed"), name) if parts else None


def _joined(df: pl.DataFrame, name: str) -> pl.DataFrame:
    """A hive-partitioned table read back whole: without the partition column, in its schema's order."""
    df = df.drop(PART_COLUMN) if PART_COLUMN in df.columns else df
    return df.sort(SORT_KEYS[name], nulls_last=True) if name in SORT_KEYS else df


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def publish(output: Store | str | Path, build: Callable[[Path], T], keep: int = 2) -> tuple[Store, T]:
    """Build a new version with `build(local_folder)` and make it the published index at `output`, in one
    atomic step; keep the newest `keep` versions. Returns the version's Store and what `build` returned. If
    `build` fails, nothing changes for readers and its staging folder is removed."""
    out = Store(output)
    now = time.time_ns()  # names sort in publishing order (pruning keeps the newest)
    version = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime(now / 1e9))}.{now % 10**9:09d}-{uuid.uuid4().hex[:4]}"
    local = out.local_path()
    # locally the staging folder sits beside the versions, so making it a version is a rename
    staging = (
        Path(tempfile.mkdtemp(prefix=f".staging-{version}-", dir=_mkdir(local / VERSIONS_DIR)))
        if local is not None
        else Path(tempfile.mkdtemp(prefix="graphrag-ray-staging-"))
    )
    try:
        built = build(staging)
        if local is not None:
            os.replace(staging, local / VERSIONS_DIR / version)
        else:
            out.upload_tree(staging, f"{VERSIONS_DIR}/{version}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    out.write_bytes(CURRENT_POINTER, version.encode())
    _prune(out, version, keep)
    return out.child(f"{VERSIONS_DIR}/{version}"), built


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _prune(out: Store, current: str, keep: int) -> None:
    versions = out.child(VERSIONS_DIR)
    older = [v for v in versions.list_dirs() if v != current]
    for stale in older[: len(older) - max(0, keep - 1)]:
        versions.delete_tree(stale)
    local = versions.local_path()
    if local is not None:  # staging folders of runs that died while writing (the run lock keeps runs apart)
        for leftover in local.glob(".staging-*"):
            shutil.rmtree(leftover, ignore_errors=True)


def current_index(output: Store | str | Path) -> Store | None:
    """The published index at `output`: the version CURRENT names; a plain index folder (tables at its top, as
    copied by hand, or Microsoft GraphRAG's output) as it is; None when there is no index."""
    out = Store(output)
    pointer = out.read_bytes(CURRENT_POINTER)
    if pointer is not None:
        return out.child(f"{VERSIONS_DIR}/{pointer.decode().strip()}")
    if out.exists("entities.parquet") or out.is_dir("entities") or is_legacy_index(out):
        return out
    return None


def published_versions(output: Store | str | Path) -> list[dict]:
    """Every version kept at `output`, newest first, each with its stats.json."""
    out = Store(output)
    pointer = out.read_bytes(CURRENT_POINTER)
    current = pointer.decode().strip() if pointer is not None else None
    found = []
    for name in sorted(out.child(VERSIONS_DIR).list_dirs() if out.is_dir(VERSIONS_DIR) else [], reverse=True):
        version = out.child(f"{VERSIONS_DIR}/{name}")
        stats = json.loads(version.read_bytes("stats.json") or b"{}")
        found.append({**stats, "version": name, "path": version.location, "current": name == current})
    return found
