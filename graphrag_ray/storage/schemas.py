"""Every table's columns and types, in one place.

Names, order and types follow Microsoft GraphRAG 3.x's output (graphrag/data_model/schemas.py), so its
query-side readers (read_indexer_entities, ...) load our index. `failures` and `entity_merges` are ours.
"""

from __future__ import annotations

from typing import TypeVar

import polars as pl

FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)

STR, INT, FLOAT = pl.String, pl.Int64, pl.Float64
STR_LIST, INT_LIST = pl.List(pl.String), pl.List(pl.Int64)
FINDING = pl.List(pl.Struct({"summary": pl.String, "explanation": pl.String}))

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "documents": {
        "id": STR,
        "human_readable_id": INT,
        "title": STR,
        "text": STR,
        "text_unit_ids": STR_LIST,
        "creation_date": STR,
        "raw_data": STR,  # raw_data: JSON of the input row's other columns
    },
    "text_units": {
        "id": STR,
        "human_readable_id": INT,
        "text": STR,
        "n_tokens": INT,
        "document_id": STR,
        "entity_ids": STR_LIST,
        "relationship_ids": STR_LIST,
        "covariate_ids": STR_LIST,
        # ours, after Microsoft's columns: where in its document the unit is (`report.pdf p. 12`, `guide.md §
        # Setup`) for documents with pages or headings; null for plain text
        "location": STR,
    },
    "entities": {
        "id": STR,
        "human_readable_id": INT,
        "title": STR,
        "type": STR,
        "description": STR,
        "text_unit_ids": STR_LIST,
        "frequency": INT,
        "degree": INT,
    },
    "relationships": {
        "id": STR,
        "human_readable_id": INT,
        "source": STR,
        "target": STR,
        "description": STR,
        "weight": FLOAT,
        "combined_degree": INT,
        "text_unit_ids": STR_LIST,
    },
    "communities": {
        "id": STR,
        "human_readable_id": INT,
        "community": INT,
        "level": INT,
        "parent": INT,
        "children": INT_LIST,
        "title": STR,
        "entity_ids": STR_LIST,
        "relationship_ids": STR_LIST,
        "text_unit_ids": STR_LIST,
        "period": STR,
        "size": INT,
    },
    "community_reports": {
        "id": STR,
        "human_readable_id": INT,
        "community": INT,
        "level": INT,
        "parent": INT,
        "children": INT_LIST,
        "title": STR,
        "summary": STR,
        "full_content": STR,
        "rank": FLOAT,
        "rating_explanation": STR,
        "findings": FINDING,
        "full_content_json": STR,
        "period": STR,
        "size": INT,
    },
    "covariates": {
        "id": STR,
        "human_readable_id": INT,
        "covariate_type": STR,
        "type": STR,
        "description": STR,
        "subject_id": STR,
        "object_id": STR,
        "status": STR,
        "start_date": STR,
        "end_date": STR,
        "source_text": STR,
        "text_unit_id": STR,
    },
    "entity_merges": {  # entity resolution: `merged` (a name) became part of `entity`, by `rule`, for `reason`
        "entity_id": STR,
        "entity": STR,
        "merged_id": STR,
        "merged": STR,
        "rule": STR,
        "reason": STR,
    },
    "failures": {"step": STR, "item_id": STR, "source": STR, "reason": STR},
}

# Tables of a run in progress that are published in another form
RUN_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    # what the embed steps yield, left in the run's partition files (its vectors become the index's lancedb/);
    # a vector is its float32 bytes: built, sent between processes and read back without a Python float each
    "embedding_rows": {"id": STR, "target": STR, "text": STR, "vector": pl.Binary},
    # the manifest of vectors: a row's id and target (its lancedb table), and the item and file holding its vector
    "embeddings": {"id": STR, "target": STR, "item_id": STR, "file": STR},
    # what extraction yields per text unit (LLM or NLP), before the merge
    "extracted_entities": {"title": STR, "type": STR, "description": STR, "text_unit_id": STR, "order": pl.Int64},
    "extracted_relationships": {
        "source": STR,
        "target": STR,
        "description": STR,
        "weight": pl.Float64,
        "text_unit_id": STR,
        "order": pl.Int64,
    },
    # the text units as chunking cuts them (document order and position: the published numbering follows them)
    "text_unit_rows": {
        "id": STR,
        "text": STR,
        "n_tokens": pl.Int64,
        "document_id": STR,
        "doc_order": pl.Int64,
        "chunk_index": pl.Int64,
        "location": STR,
    },
    # a PDF / Office / HTML / EPUB file as parse_documents reads it: its text and structure (index/formats.py), or
    # why it cannot be read (`error`)
    "parsed_documents": {"source": STR, "title": STR, "text": STR, "structure": STR, "error": STR},
    # which of a text unit's entities each of its sentences names (the fast method's extractive reports)
    "sentence_mentions": {
        "unit_id": STR,
        "sentence": pl.Int32,
        "start": pl.Int32,
        "length": pl.Int32,
        "entity_ids": pl.List(STR),
    },
}

# Our columns after Microsoft's: an index another engine (or an earlier version) wrote may lack them - read as nulls
OPTIONAL_COLUMNS: dict[str, set[str]] = {"text_units": {"location"}}

# Tables a complete index must have (covariates only when claims are on).
REQUIRED_TABLES = ("documents", "text_units", "entities", "relationships", "communities", "community_reports")
SORT_KEYS = {name: ["id"] for name in SCHEMAS} | {
    "failures": ["step", "item_id", "reason"],
    "entity_merges": ["entity", "merged"],
}


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMAS[table])


def conform(df: FrameT, table: str) -> FrameT:
    """Exactly the table's columns, in order, with its types; missing columns become nulls (a LazyFrame stays
    lazy)."""
    schema = SCHEMAS[table]
    present = set(df.collect_schema().names())
    missing = [pl.lit(None, dtype=dtype).alias(name) for name, dtype in schema.items() if name not in present]
    if missing:
        df = df.with_columns(missing)
    return df.select([pl.col(name).cast(dtype) for name, dtype in schema.items()])
