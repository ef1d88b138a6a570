"""Parquet tables with Polars: atomic writes, hive partitions for large tables, atomic publish.

Writers always write to a hidden temp name (`.name.tmp-*`) and rename; readers skip `.`/`_` names, so a
crash never leaves a half-written table visible. A finished index is published by swapping the `output`
symlink to a new version folder in one step; the previous version stays intact until then.
"""

from __future__ import annotations

import io
import os
import shutil
import time
import uuid
from pathlib import Path

import polars as pl

from graphrag_ray.storage.location import Store, is_uri
from graphrag_ray.storage.schemas import SCHEMAS, SORT_KEYS, conform

PART_COLUMN = "part"
CURRENT_POINTER = "CURRENT"  # object-store output: names the published version
HIDDEN = [".", "_"]


def write_table(df: pl.DataFrame, folder: str | Path, name: str, partition_rows: int | None = None,
                schema_name: str | None = None, typed: bool = True) -> Path:
    """Write `name` into `folder` atomically. A published table (typed) gets exactly its schema's columns,
    types and sort order; intermediate tables (typed=False) are written as they are."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    known = (schema_name or (name if name in SCHEMAS else None)) if typed else None
    if known:
        df = conform(df, known).sort(SORT_KEYS[known], nulls_last=True, maintain_order=True)
    tmp = folder / f".{name}.tmp-{uuid.uuid4().hex[:8]}"
    if partition_rows and df.height > partition_rows:
        buckets = max(2, -(-df.height // partition_rows))
        parted = df.with_columns((pl.col("id").hash(seed=0) % buckets).cast(pl.Int32).alias(PART_COLUMN))
        parted.write_parquet(tmp, partition_by=PART_COLUMN, mkdir=True)
        target = folder / name
        _remove(folder / f"{name}.parquet")
    else:
        df.write_parquet(tmp)
        target = folder / f"{name}.parquet"
        _remove(folder / name)
    if target.is_dir():
        _remove(target)
    os.replace(tmp, target)
    return target


def table_path(folder: str | Path, name: str) -> Path | None:
    folder = Path(folder)
    for candidate in (folder / f"{name}.parquet", folder / name):
        if candidate.exists():
            return candidate
    return None


def read_table(folder: str | Path, name: str) -> pl.DataFrame | None:
    if is_uri(folder):
        return _read_stored_table(Store(folder), name)
    path = table_path(folder, name)
    if path is None:
        return None
    if path.is_dir():
        return _joined(pl.scan_parquet(path, hive_partitioning=True, hidden_file_prefix=HIDDEN).collect(), name)
    return pl.read_parquet(path)


def _joined(df: pl.DataFrame, name: str) -> pl.DataFrame:
    """A hive-partitioned table read back whole: without the partition column, in its schema's order."""
    df = df.drop(PART_COLUMN) if PART_COLUMN in df.columns else df
    return df.sort(SORT_KEYS[name], nulls_last=True) if name in SORT_KEYS else df


def _read_stored_table(store: Store, name: str) -> pl.DataFrame | None:
    """A table in an object store: one `name.parquet` object, or the hive-partitioned files below `name/`."""
    data = store.read_bytes(f"{name}.parquet")
    if data is not None:
        return pl.read_parquet(io.BytesIO(data))
    parts = [pl.read_parquet(io.BytesIO(store.read_bytes(f"{name}/{f.relative}")))
             for f in store.child(name).list_files("*.parquet")]
    if not parts:
        return None
    return _joined(pl.concat(parts, how="vertical_relaxed"), name)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def versions_dir(output: Path) -> Path:
    return output.parent / f".{output.name}-versions"


def publish(staged: Path, output: str | Path, keep: int = 2) -> Path | str:
    """Make `staged` (a finished index folder) the published `output`, in one atomic step."""
    if is_uri(output):
        return _publish_to_store(staged, str(output), keep)
    output = Path(output)
    versions = versions_dir(output)
    versions.mkdir(parents=True, exist_ok=True)
    version = versions / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    os.replace(staged, version)
    if output.exists() and not output.is_symlink():  # a plain folder from elsewhere: keep it as a version
        os.replace(output, versions / f"previous-{uuid.uuid4().hex[:6]}")
    link_tmp = output.parent / f".{output.name}.link-{uuid.uuid4().hex[:6]}"
    os.symlink(os.path.relpath(version, output.parent), link_tmp)
    os.replace(link_tmp, output)  # readers see the old index or the new one, never a mix
    old = sorted((p for p in versions.iterdir() if p.is_dir() and p != version), key=lambda p: p.stat().st_mtime)
    for stale in old[:-max(0, keep - 1)] if keep > 1 else old:
        shutil.rmtree(stale, ignore_errors=True)
    return version


def _publish_to_store(staged: Path, output: str, keep: int) -> str:
    """Object stores have no rename: upload the version under `versions/`, then switch readers to it by
    rewriting the one small CURRENT object (a single atomic PUT). Readers see the old index or the new one."""
    store = Store(output)
    now = time.time_ns()  # names sort in publishing order (pruning keeps the newest)
    version = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime(now / 1e9))}.{now % 10**9:09d}-{uuid.uuid4().hex[:4]}"
    store.upload_tree(staged, f"versions/{version}")
    store.write_bytes(CURRENT_POINTER, version.encode())
    versions = sorted({f.relative.split("/", 1)[0] for f in store.child("versions").list_files()} | {version})
    stale = [v for v in versions if v != version]
    for old in stale[:len(stale) - max(0, keep - 1)]:
        store.delete_tree(f"versions/{old}")
    shutil.rmtree(staged, ignore_errors=True)
    return f"{output}/versions/{version}"


def current_index(output: str | Path) -> str | Path | None:
    """The folder of the published index: a local path as it is (the symlink points at the version), or for an
    object store the version CURRENT names (None when nothing was published there)."""
    if not is_uri(output):
        return Path(output)
    store = Store(output)
    pointer = store.read_bytes(CURRENT_POINTER)
    if pointer is not None:
        return f"{store.location}/versions/{pointer.decode().strip()}"
    return store.location if store.read_bytes("entities.parquet") is not None else None
