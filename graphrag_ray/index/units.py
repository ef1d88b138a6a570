"""The corpus as text units without running the pipeline: loaded and chunked exactly as `index` does (estimate
and prompt-tune read it)."""

from __future__ import annotations

import polars as pl

from graphrag_ray.exec.step import StepContext
from graphrag_ray.index.operations.chunking import documents_to_cut, text_units_of
from graphrag_ray.index.operations.documents import load_documents


def corpus_units(ctx: StepContext) -> tuple[pl.DataFrame, list[dict], int]:
    """(documents, text units in document order, documents that failed to load)."""
    docs, failures = load_documents(ctx)
    units = [unit for document in documents_to_cut(docs).iter_rows(named=True) for unit in text_units_of(ctx, document)]
    return docs, units, failures.height
