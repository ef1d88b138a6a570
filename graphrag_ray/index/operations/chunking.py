"""Cutting a document into text units: token windows (tiktoken) with overlap, decoded leniently.

Text-unit ids hash where the document comes from (its input id, or its file and row), the window's position and
its text: identical text in two documents never collides, and a window an edit did not touch keeps its id (what
`update` relies on). Windows are cut on token boundaries and decoded leniently, so a CJK character
split across a boundary is dropped from that edge rather than turned into a replacement character.
"""

from __future__ import annotations

import json

import polars as pl

from graphrag_ray.exec.step import StepContext
from graphrag_ray.ids import content_id, document_source
from graphrag_ray.index.formats import location_of
from graphrag_ray.llm.tokens import encoding_for_model, get_encoding


def chunk_encoding(ctx: StepContext) -> str:
    model = ctx.settings.model(ctx.settings.extract_graph.model_id)
    return ctx.settings.chunks.encoding or model.encoding or encoding_for_model(model.model)


def windows(tokens: list[int], size: int, overlap: int) -> list[tuple[int, int]]:
    step = max(1, size - overlap)
    spans, start = [], 0
    while start < len(tokens):
        spans.append((start, min(len(tokens), start + size)))
        if start + size >= len(tokens):
            break
        start += step
    return spans


def documents_to_cut(documents: pl.DataFrame, skip: set[str] = frozenset()) -> pl.DataFrame:
    """What cutting a document needs, per document of the table (but those in `skip`), in the table's order: a
    frame of items (exec/items.py), the texts the documents table's own."""
    items = documents.select(
        pl.col("id").alias("item_id"),
        "text",
        pl.col("human_readable_id").alias("order"),
        pl.Series("source", [document_source(raw) for raw in documents["raw_data"]], dtype=pl.String),
        # pages and headings (index/formats.py) place each unit; the file names the place
        pl.Series("marks", [_marks(raw) for raw in documents["raw_data"]], dtype=pl.String),
        pl.Series("file", [_raw(raw).get("source") for raw in documents["raw_data"]], dtype=pl.String),
    )
    return items.filter(~pl.col("item_id").is_in(list(skip))) if skip else items


def _raw(raw_data: str | None) -> dict:
    return json.loads(raw_data) if raw_data and '"structure"' in raw_data else {}


def _marks(raw_data: str | None) -> str | None:
    structure = _raw(raw_data).get("structure")
    return json.dumps(structure["marks"], ensure_ascii=False) if structure and structure.get("marks") else None


def text_units_of(ctx: StepContext, document: dict) -> list[dict]:
    """The text unit rows of one document (`item_id`, `text`, `order`: its number, `source`: where it is from;
    `marks`, `file`: its pages and headings and its file, to say where each unit is)."""
    enc = get_encoding(chunk_encoding(ctx))
    cfg = ctx.settings.chunks
    tokens = enc.encode(document["text"], disallowed_special=())
    marks = json.loads(document["marks"]) if document.get("marks") else None
    starts = enc.decode_with_offsets(tokens)[1] if marks else None  # each token's character offset
    units = []
    for index, (start, end) in enumerate(windows(tokens, cfg.size, cfg.overlap)):
        text = enc.decode_bytes(tokens[start:end]).decode("utf-8", errors="ignore").strip()
        if not text:
            continue
        units.append(
            {
                "id": content_id("text_unit", document["source"], index, text),
                "text": text,
                "n_tokens": end - start,
                "document_id": document["item_id"],
                "doc_order": document["order"],
                "chunk_index": index,
                "location": location_of(marks, document["file"] or "", starts[start], starts[end - 1])
                if starts
                else None,
            }
        )
    return units
