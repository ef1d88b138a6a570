"""Documents from the input files (index/input.py finds and reads them): the documents table and its failures.

The load_documents step's work, and what estimate and prompt-tune read the corpus with (index/units.py).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import PurePosixPath

import polars as pl

from graphrag_ray.errors import InputError
from graphrag_ray.exec.step import StepContext
from graphrag_ray.ids import content_id
from graphrag_ray.index.formats import CONVERTED, parsed_row
from graphrag_ray.index.input import SUPPORTED, discover, kind_of, read_rows, unsupported
from graphrag_ray.storage.location import FoundFile
from graphrag_ray.storage.schemas import SCHEMAS

DOCUMENT_SCHEMA = {
    "id": pl.String,
    "human_readable_id": pl.Int64,
    "title": pl.String,
    "text": pl.String,
    "text_unit_ids": pl.List(pl.String),
    "creation_date": pl.String,
    "raw_data": pl.String,
}
BATCH_ROWS = 1000  # documents held as Python dicts at once: the corpus's text is held once, as the table's


def load_documents(ctx: StepContext, parsed: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(documents, failures): every readable row with text, in file order; the rest as failures rows. Rows become
    table a thousand at a time (at 100M tokens the whole corpus as dicts and then as a table was twice its text).
    PDF / Office files come from `parsed` (the parse_documents step's table), or are parsed here when it is None."""
    table = _Documents()
    failures: list[dict] = []
    parsed_rows = {r["source"]: r for r in parsed.iter_rows(named=True)} if parsed is not None else None
    for file in discover(ctx.settings, ctx.root):
        kind = kind_of(ctx.settings, file)
        try:
            rows = (
                _parsed_rows(file, kind, parsed_rows) if kind in CONVERTED.values() else read_rows(ctx.settings, file)
            )
        except InputError:
            raise
        except (UnicodeDecodeError, ValueError, OSError, pl.exceptions.PolarsError) as exc:
            reason = (
                str(exc)  # the parser's reason says what the file is and why it cannot be read
                if kind in CONVERTED.values()
                else f"unreadable {kind} file: {type(exc).__name__}: {str(exc)[:200]}"
            )
            failures.append(_failure(file, reason, "parse_documents" if kind in CONVERTED.values() else None))
            continue
        created = dt.datetime.fromtimestamp(file.mtime_s or 0, dt.UTC).isoformat()
        for row_index, row in enumerate(rows):
            failure = table.add({**row, "source": file.source, "row": row_index, "creation_date": created})
            if failure is not None:
                failures.append(failure)
    for file in unsupported(ctx.settings, ctx.root):
        kind = PurePosixPath(file.name).suffix.lower() or "with no extension"
        failures.append(_failure(file, f"file type {kind} is not read (supported: {', '.join(SUPPORTED)})"))
    return table.frame(), pl.DataFrame(failures, schema=_FAIL)


_FAIL = SCHEMAS["failures"]


def _parsed_rows(file: FoundFile, kind: str, parsed_rows: dict[str, dict] | None) -> list[dict]:
    """A parsed file's one document (its structure kept in raw_data); ValueError with the reason it is unreadable."""
    row = parsed_rows.get(file.source) if parsed_rows is not None else parsed_row(file, kind)
    if row is None:  # found now but not when parse_documents ran: the input changed during the run
        raise ValueError("the file appeared after parse_documents ran; run the command again")
    if row["error"]:
        raise ValueError(row["error"])
    return [{"title": row["title"], "text": row["text"], "meta": {"structure": json.loads(row["structure"])}}]


def _failure(file: FoundFile, reason: str, step: str | None = None) -> dict:
    return {"step": step or "load_documents", "item_id": file.name, "source": file.source, "reason": reason}


class _Documents:
    """The documents table as it is read: a document with no text or a repeated id is a failures row, the rest
    rows, made into table batches as they come."""

    def __init__(self):
        self.batches: list[pl.DataFrame] = []
        self.rows: list[dict] = []
        self.seen: dict[str, str] = {}  # the key of each document kept -> the file it came from
        self.count = 0

    def add(self, doc: dict) -> dict | None:
        """Add one read row; returns its failures row when it is not a document."""
        label = str(doc.get("given_id") or f"{doc['source']}#{doc['row']}")
        text = doc.get("text")
        if text is None or not str(text).strip():
            return {
                "step": "load_documents",
                "item_id": label,
                "source": doc["source"],
                "reason": "document has no text",
            }
        given = doc.get("given_id")
        key = f"id:{given}" if given not in (None, "") else f"src:{doc['source']}#{doc['row']}"
        if key in self.seen:
            return {
                "step": "load_documents",
                "item_id": label,
                "source": doc["source"],
                "reason": f"duplicate document id '{given}' (first seen in {self.seen[key]}); skipped",
            }
        self.seen[key] = doc["source"]
        self.rows.append(
            {
                "id": content_id("document", key, doc["title"], text),
                "human_readable_id": self.count,
                "title": doc["title"],
                "text": str(text),
                "text_unit_ids": [],
                "creation_date": doc["creation_date"],
                "raw_data": json.dumps(
                    {
                        **doc["meta"],
                        "source": doc["source"],
                        **({"input_id": given} if given not in (None, "") else {"row": doc["row"]}),
                    },
                    ensure_ascii=False,
                    default=str,
                ),
            }
        )
        self.count += 1
        if len(self.rows) >= BATCH_ROWS:
            self._flush()
        return None

    def _flush(self) -> None:
        if self.rows:
            self.batches.append(pl.DataFrame(self.rows, schema=DOCUMENT_SCHEMA))
            self.rows = []

    def frame(self) -> pl.DataFrame:
        self._flush()
        if not self.batches:
            return pl.DataFrame(schema=DOCUMENT_SCHEMA)
        return pl.concat(self.batches, rechunk=True)


HEAD_CHARS = 200  # enough to tell a document's first text unit, and to hold a title line


def units_with_titles(tables) -> pl.DataFrame:
    """The text units, each with its document's `title` as `document_title` and the document's first characters as
    `document_head` (a step naming a document's title as an entity of its units reads them)."""
    titles = tables["documents"].select(
        pl.col("id").alias("document_id"),
        pl.col("title").alias("document_title"),
        pl.col("text").str.slice(0, HEAD_CHARS).alias("document_head"),
    )
    return tables["text_units"].join(titles, on="document_id", how="left", maintain_order="left")
