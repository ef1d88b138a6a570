"""Ray Data in and out: index the rows of a `ray.data.Dataset` (read from S3, Parquet, a database... by Ray Data),
and hand a published index's tables on as Datasets.

    ds = ray.data.read_parquet("s3://bucket/docs/")          # rows: id, text, optional title and metadata
    api.build_index(root="project", documents=ds)
    tables = api.read_tables("project")                       # {"entities": Dataset, "relationships": ...}
"""

from __future__ import annotations

import shutil
from pathlib import Path

from graphrag_ray.errors import InputError

DATASET_INPUT = ".dataset-input"  # below the project root: the rows a Dataset gave, as Parquet files


def documents_as_input(settings, root: Path, documents):
    """Settings whose input is `documents` (a ray.data.Dataset) written as Parquet files under the project: the
    documents are then read, fingerprinted and updated as any input folder is (an `update` with a changed Dataset
    sees its changed rows). Its columns: `text` (required), `id` and `title` (optional), others kept as metadata."""
    columns = set(documents.schema().names)
    if "text" not in columns:
        raise InputError(f"documents: the Dataset has no 'text' column (has: {', '.join(sorted(columns))})")
    folder = root / DATASET_INPUT
    shutil.rmtree(folder, ignore_errors=True)
    ordered = documents.sort("id") if "id" in columns else documents  # the same rows give the same files
    ordered.repartition(1).write_parquet(str(folder))  # one file: its name does not depend on the block layout
    for written in folder.glob("*.parquet"):
        written.rename(folder / "documents.parquet")
    chosen = settings.model_copy(deep=True)
    chosen.input = chosen.input.model_copy(
        update={"base_dir": DATASET_INPUT, "file_type": "parquet", "file_pattern": None, "text_column": "text"}
    )
    return chosen


def read_tables(root: str | Path = ".", data: str | Path | None = None, config_file=None) -> dict:
    """Every table of the published index at ROOT (or the index folder / URI `data`) as a ray.data.Dataset."""
    import ray

    from graphrag_ray.config.load import load_settings
    from graphrag_ray.errors import IndexMissingError
    from graphrag_ray.storage.location import resolve
    from graphrag_ray.storage.schemas import REQUIRED_TABLES
    from graphrag_ray.storage.tables import current_index, read_table, table_file

    location = data if data is not None else resolve(root, load_settings(root, config_file).output.base_dir)
    folder = current_index(location)
    if folder is None:
        raise IndexMissingError(f"no index at {location}: run `graphrag-ray index` first")
    out = {}
    for name in (*REQUIRED_TABLES, "covariates", "failures"):
        if (file := table_file(folder, name)) is not None:  # Ray Data reads it in parallel blocks
            out[name] = ray.data.read_parquet(str(file))
        elif (table := read_table(folder, name)) is not None:  # partitioned, or in an object store
            out[name] = ray.data.from_arrow(table.to_arrow())
    return out
