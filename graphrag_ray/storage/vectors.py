"""Vector tables (under the index folder's lancedb/): one per embedded field, as Microsoft GraphRAG names them
(entity_description, text_unit_text, community_full_content).

LanceDB holds every table. A table smaller than `ann_index_rows` has no ANN index - LanceDB would scan it whole
anyway - and is also written as `<name>.flat.arrow` (ids and unit vectors, Arrow IPC): a query searches it exactly
with numpy over a memory map, without importing LanceDB (three seconds of a query command's start-up here)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.msgraphrag_layout import their_vector_table

FLAT_SUFFIX = ".flat.arrow"
VECTOR_TABLES = ("entity_description", "text_unit_text", "community_full_content")
# exact re-rank per result wanted when the setting leaves it to the index (jobs/bench_ann.py, 200k x 1536 rows:
# recall@10 1.0 at 12 ms for IVF_HNSW_SQ with 5; IVF_PQ needs 40 for 0.997 at 22 ms)
REFINE_BY_INDEX = {"IVFHNSWSQ": 5, "IVFPQ": 40}  # LanceDB's index type names, case and "_" aside


def write_vectors(
    folder: str | Path,
    name: str,
    ids: list[str],
    texts: list[str],
    vectors: list[list[float]] | np.ndarray,
    ann_index_rows: int,
    ann_index: str = "ivf_hnsw_sq",
) -> None:
    """A new table in a new index version, from rows in memory."""
    write_vector_batches(
        folder, name, [(ids, texts, np.asarray(vectors, dtype=np.float32))], len(ids), ann_index_rows, ann_index
    )


def write_vector_batches(
    folder: str | Path,
    name: str,
    batches: Iterable[tuple[list[str], list[str], np.ndarray]],
    rows: int,
    ann_index_rows: int,
    ann_index: str = "ivf_hnsw_sq",
) -> None:
    """A new table in a new index version from `rows` rows arriving in (ids, texts, float32 matrix) batches, each
    written as it comes: a large index's vectors are never all in memory at once. (Mode "create": lance warns on
    stderr when "overwrite" finds nothing to overwrite.)"""
    batches = iter(batches)
    first = next((b for b in batches if len(b[0])), None)
    if first is None:
        return
    dim = first[2].shape[1]
    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("vector", pa.list_(pa.float32(), dim))])
    flat = rows < ann_index_rows
    flat_writer = None
    if flat:
        Path(folder).mkdir(parents=True, exist_ok=True)
        flat_schema = pa.schema([("id", pa.string()), ("vector", pa.list_(pa.float32(), dim))])
        sink = pa.OSFile(str(Path(folder) / f"{name}{FLAT_SUFFIX}"), "wb")
        flat_writer = pa.ipc.new_file(sink, flat_schema)

    def record_batches():
        for ids, texts, matrix in itertools.chain([first], batches):
            if not len(ids):
                continue
            matrix = np.asarray(matrix, dtype=np.float32)
            if flat_writer is not None:
                norms = np.linalg.norm(matrix, axis=1, keepdims=True)
                unit = matrix / np.where(norms == 0, 1, norms)  # unit rows: cosine similarity is a dot product
                flat_writer.write_batch(
                    pa.record_batch([pa.array(ids, pa.string()), _fixed_size(unit)], schema=flat_schema)
                )
            yield pa.record_batch(
                [pa.array(ids, pa.string()), pa.array(texts, pa.string()), _fixed_size(matrix)], schema=schema
            )

    import lancedb

    try:
        data = pa.RecordBatchReader.from_batches(schema, record_batches())
        tbl = lancedb.connect(str(folder)).create_table(name, data=data)
    finally:
        if flat_writer is not None:
            flat_writer.close()
            sink.close()
    if not flat:
        tbl.create_index(metric="cosine", vector_column_name="vector", index_type=ann_index.upper())


def vector_matrix(column) -> np.ndarray:
    """A Polars column of equal-length vectors - float32 bytes (Binary), or a list column - as a float32 matrix,
    straight from its buffers (as Python lists, 10M tokens' vectors were a gigabyte of floats)."""
    if not len(column):
        return np.zeros((0, 0), dtype=np.float32)
    if column.dtype == pl.Binary:
        return np.frombuffer(b"".join(column.to_list()), dtype=np.float32).reshape(len(column), -1)
    return column.explode().to_numpy().astype(np.float32, copy=False).reshape(len(column), -1)


def _fixed_size(matrix: np.ndarray) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), matrix.shape[1])


def other_dimensions(path: str, stored: int, asked: int) -> GraphRagRayError:
    return GraphRagRayError(
        f"vector table {path} holds {stored}-dimension vectors and the query's embedding has "
        f"{asked}: query with the embedding model (and dimensions) the index was built with"
    )


def unreadable(path: str, exc: Exception) -> GraphRagRayError:
    """One line naming a vector table that cannot be read, and what to do."""
    first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return GraphRagRayError(
        f"vector table {path} cannot be read ({type(exc).__name__}: {first}): rebuild the "
        "index with `graphrag-ray index`"
    )


class FlatVectors:
    """A small vector table searched exactly: ids and unit vectors, memory-mapped (a local index) or read."""

    def __init__(self, source, where: str = ""):
        self.where = where
        table = pa.ipc.open_file(source).read_all()
        self.ids = table["id"].to_pylist()
        values = table["vector"].combine_chunks()
        flat = values.flatten()  # float32 without nulls: its data buffer is the matrix (to_numpy imports pandas)
        self.matrix = np.frombuffer(
            flat.buffers()[1], dtype=np.float32, count=len(flat), offset=flat.offset * 4
        ).reshape(len(self.ids), values.type.list_size)

    def nearest(self, vector: list[float], k: int) -> list[str]:
        query = np.asarray(vector, dtype=np.float32)
        if len(query) != self.matrix.shape[1]:
            raise other_dimensions(self.where, self.matrix.shape[1], len(query))
        scores = self.matrix @ (query / (np.linalg.norm(query) or 1.0))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))  # ties: table order, deterministic
        return [self.ids[i] for i in order]


class LanceVectors:
    """A LanceDB table (with its ANN index when large) behind the same `nearest`: an indexed table is searched
    probing `nprobes` partitions and re-ranking `refine_factor` x k candidates exactly (PQ distances alone are
    coarse)."""

    def __init__(self, table, nprobes: int = 8, refine_factor: int | None = None):
        self.table, self.nprobes = table, nprobes
        index = self.vector_index()
        self.refine_factor = refine_factor or REFINE_BY_INDEX.get(
            str(index.index_type).upper().replace("_", "") if index else None, 40
        )
        # an index built for another metric (Microsoft GraphRAG's tables: IVF_FLAT, L2) cannot rank by cosine:
        # those tables are searched exactly instead (lance would fall back to that, with a warning per query)
        self.exact = index is not None and self._metric(index) != "cosine"
        self.dim = getattr(table.schema.field("vector").type, "list_size", None)

    def vector_index(self):
        """The vector column's index (lance's IndexConfig), None with no index."""
        try:
            found = [i for i in self.table.list_indices() if "vector" in i.columns]
        except Exception as exc:  # noqa: BLE001 - lance's own errors
            raise unreadable(self.table.uri, exc) from None
        return found[0] if found else None

    def _metric(self, index) -> str:
        try:
            return str(self.table.index_stats(index.name).distance_type).lower()
        except Exception as exc:  # noqa: BLE001 - lance's own errors
            raise unreadable(self.table.uri, exc) from None

    def nearest(self, vector: list[float], k: int) -> list[str]:
        if self.dim is not None and len(vector) != self.dim:
            raise other_dimensions(self.table.uri, self.dim, len(vector))
        try:
            query = self.table.search(vector).metric("cosine").limit(k)
            query = (
                query.bypass_vector_index()
                if self.exact
                else query.nprobes(self.nprobes).refine_factor(self.refine_factor)
            )
            return [hit["id"] for hit in query.select(["id", "_distance"]).to_list()]
        except Exception as exc:  # lance's own errors: a damaged data file shows only when it is read
            raise unreadable(self.table.uri, exc) from None


def open_searchable(
    folder: Store | str | Path, name: str, nprobes: int = 8, refine_factor: int | None = None
) -> FlatVectors | LanceVectors | None:
    """What a query searches: the flat copy when the table has one, else the LanceDB table; None when the index
    has no table by that name. Nothing is written."""
    store = folder if isinstance(folder, Store) else Store(str(folder))
    flat = f"{name}{FLAT_SUFFIX}"
    if store.exists(flat):
        try:
            local = store.local_path(flat)
            return FlatVectors(
                pa.memory_map(str(local)) if local else pa.BufferReader(store.read_bytes(flat)),
                f"{store.location}/{flat}",
            )
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise unreadable(f"{store.location}/{flat}", exc) from None
    table = open_vectors(store, name)
    return LanceVectors(table, nprobes, refine_factor) if table is not None else None


def open_vectors(folder: Store | str | Path, name: str):
    """The table, or None when the index has none by that name; a table that cannot be read is an error naming
    it. Nothing is created (lancedb.connect makes a missing folder)."""
    store = folder if isinstance(folder, Store) else Store(str(folder))
    if not store.exists(f"{name}.lance"):
        name = their_vector_table(store, name)  # a Microsoft GraphRAG 1.x / 2.x index's name for it
        if name is None:
            return None
    import lancedb

    try:
        return lancedb.connect(str(store.location)).open_table(name)
    except Exception as exc:  # lance raises its own errors for a damaged table
        raise unreadable(f"{store.location}/{name}.lance", exc) from None


def stored_vectors(folder: Store | str | Path, name: str) -> pl.DataFrame | None:
    """A version's table as rows (text, vector: float32 bytes), for an update to reuse the vectors of texts it
    already embedded; None when the version has no such table."""
    table = open_vectors(folder, name)
    if table is None:
        return None
    try:
        data = table.to_arrow().select(["text", "vector"])
    except Exception as exc:  # noqa: BLE001 - lance's own errors
        raise unreadable(table.uri, exc) from None
    column = data.column("vector").combine_chunks()
    matrix = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(data.num_rows, -1)
    return pl.DataFrame(
        {"text": data.column("text").to_pylist(), "vector": [row.tobytes() for row in matrix]},
        schema={"text": pl.String, "vector": pl.Binary},
    )
