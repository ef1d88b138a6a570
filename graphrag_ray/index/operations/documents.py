"""Documents from the input files (index/input.py finds and reads them): the documents table and its failures.

The load_documents step's work, and what estimate and prompt-tune read the corpus with (index/units.py).
"""

from __future__ import annotations

import datetime as dt
import json

import polars as pl

from graphrag_ray.errors import InputError
from graphrag_ray.exec.step import StepContext
from graphrag_ray.ids import content_id
from graphrag_ray.index.input import discover, kind_of, read_rows
from graphrag_ray.storage.location import FoundFile
from graphrag_ray.storage.schemas import SCHEMAS


def load_documents(ctx: StepContext) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(documents, failures): every readable row with text, in file order; the rest as failures rows."""
    docs: list[dict] = []
    failures: list[dict] = []
    for file in discover(ctx.settings, ctx.root):
        try:
            rows = read_rows(ctx.settings, file)
        except InputError:
            raise
        except (UnicodeDecodeError, ValueError, OSError, pl.exceptions.PolarsError) as exc:
            failures.append(
                _failure(file, f"unreadable {kind_of(ctx.settings, file)} file: {type(exc).__name__}: {str(exc)[:200]}")
            )
            continue
        created = dt.datetime.fromtimestamp(file.mtime_s or 0, dt.timezone.utc).isoformat()
        for row_index, row in enumerate(rows):
            docs.append({**row, "source": file.source, "row": row_index, "creation_date": created})
    return _finish(docs, failures, ctx), pl.DataFrame(failures, schema=_FAIL)


_FAIL = SCHEMAS["failures"]


def _failure(file: FoundFile, reason: str) -> dict:
    return {"step": "load_documents", "item_id": file.name, "source": file.source, "reason": reason}


def _finish(docs: list[dict], failures: list[dict], ctx: StepContext) -> pl.DataFrame:
    out, seen = [], {}
    for doc in docs:
        label = str(doc.get("given_id") or f"{doc['source']}#{doc['row']}")
        text = doc.get("text")
        if text is None or not str(text).strip():
            failures.append(
                {"step": "load_documents", "item_id": label, "source": doc["source"], "reason": "document has no text"}
            )
            continue
        given = doc.get("given_id")
        key = f"id:{given}" if given not in (None, "") else f"src:{doc['source']}#{doc['row']}"
        if key in seen:
            failures.append(
                {
                    "step": "load_documents",
                    "item_id": label,
                    "source": doc["source"],
                    "reason": f"duplicate document id '{given}' (first seen in {seen[key]}); skipped",
                }
            )
            continue
        seen[key] = doc["source"]
        out.append(
            {
                "id": content_id("document", key, doc["title"], text),
                "human_readable_id": len(out),
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
    return pl.DataFrame(
        out,
        schema={
            "id": pl.String,
            "human_readable_id": pl.Int64,
            "title": pl.String,
            "text": pl.String,
            "text_unit_ids": pl.List(pl.String),
            "creation_date": pl.String,
            "raw_data": pl.String,
        },
    )
