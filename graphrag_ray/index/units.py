"""The corpus as text units without running the pipeline: loaded and chunked exactly as `index` does (estimate
and prompt-tune read it)."""

from __future__ import annotations

import asyncio

import polars as pl

from graphrag_ray.exec.step import StepContext
from graphrag_ray.index.steps.chunk import STEP as CHUNK
from graphrag_ray.index.steps.load_documents import STEP as LOAD


def corpus_units(ctx: StepContext) -> tuple[pl.DataFrame, list[dict], int]:
    """(documents, text units in document order, documents that failed to load)."""
    loaded = LOAD.run(ctx, {})
    docs = loaded["documents"]
    units: list[dict] = []
    for item in CHUNK.items(ctx, {"documents": docs}, 0, {}):  # the chunk step's own items: the same units
        units += asyncio.run(CHUNK.process(ctx, item, None))["text_units"]
    return docs, units, loaded["failures"].height
