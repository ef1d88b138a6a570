"""LanceDB vector tables (embedded, under the index folder): one per embedded field, as Microsoft GraphRAG
names them (entity_description, text_unit_text, community_full_content)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from graphrag_ray.storage.location import Store

VECTOR_TABLES = ("entity_description", "text_unit_text", "community_full_content")


def write_vectors(folder: str | Path, name: str, ids: list[str], texts: list[str], vectors: list[list[float]],
                  ann_index_rows: int) -> None:
    """A new table in a new index version (mode "create": lance warns on stderr when "overwrite" finds nothing
    to overwrite)."""
    import lancedb

    if not ids:
        return
    dim = len(vectors[0])
    table = pa.table({"id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string()),
                      "vector": pa.array(vectors, pa.list_(pa.float32(), dim))})
    tbl = lancedb.connect(str(folder)).create_table(name, data=table)
    if len(ids) >= ann_index_rows:
        tbl.create_index(metric="cosine", vector_column_name="vector")


def open_vectors(folder: Store | str | Path, name: str):
    import lancedb

    try:
        return lancedb.connect(str(folder)).open_table(name)
    except (FileNotFoundError, ValueError):
        return None
