"""Load documents: csv / txt / md / json / jsonl / parquet from a folder or glob, UTF-8 (Chinese included).

A document with no text, or an unreadable file, goes to `failures` and the rest is indexed; a table-like file
without the text column stops the run before any LLM call, naming the columns it has.
"""

from __future__ import annotations

import datetime as dt
import glob as globlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import polars as pl
import pyarrow.fs as pafs

from graphrag_ray.errors import InputError
from graphrag_ray.index.ids import content_id
from graphrag_ray.index.step import BatchStep, StepContext, Tables
from graphrag_ray.storage.location import Store, is_uri, resolve

SUPPORTED = {".csv": "csv", ".txt": "text", ".md": "text", ".json": "json", ".jsonl": "jsonl",
             ".parquet": "parquet"}


@dataclass(frozen=True)
class InputFile:
    """One input file, local or in an object store (input.base_dir may be s3://..., gs://...)."""

    source: str  # as recorded in documents.raw_data and failures: relative to the root, or the full URI
    name: str
    mtime: float | None
    size: int
    store: Store | None = field(default=None, compare=False)  # None: a local file at `source`/`path`
    path: Path | None = None

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix.lower()

    def read_bytes(self) -> bytes:
        if self.path is not None:
            return self.path.read_bytes()
        data = self.store.read_bytes(self.name) if self.store else None
        if data is None:
            raise FileNotFoundError(self.source)
        return data


def discover(ctx: StepContext) -> list[InputFile]:
    cfg = ctx.settings.input
    base = resolve(ctx.root, cfg.base_dir)
    if is_uri(base):
        return _discover_store(str(base), cfg.file_pattern, cfg.file_type)
    if any(ch in str(base) for ch in "*?["):
        candidates = [Path(p) for p in globlib.glob(str(base), recursive=True)]
    elif base.is_dir():
        pattern = cfg.file_pattern or "**/*"
        candidates = list(base.glob(pattern))
    elif base.is_file():
        candidates = [base]
    else:
        raise InputError(f"input folder {base} does not exist")
    files = sorted(p for p in candidates if p.is_file() and not p.name.startswith((".", "_"))
                   and (cfg.file_type != "auto" or p.suffix.lower() in SUPPORTED))
    if not files:
        raise InputError(f"no input files in {base} (supported: {', '.join(SUPPORTED)})")
    stats = [p.stat() for p in files]
    return [InputFile(_source(p, ctx.root), p.name, st.st_mtime, st.st_size, path=p) for p, st in zip(files, stats)]


def _discover_store(uri: str, pattern: str | None, file_type: str) -> list[InputFile]:
    store = Store(uri)
    try:
        info = store.info()
    except OSError as exc:
        raise InputError(f"input {uri} cannot be read: {exc}") from None
    if info.type == pafs.FileType.File:  # a single object
        parent, name = uri.rsplit("/", 1)
        return [InputFile(uri, name, info.mtime.timestamp() if info.mtime else None, info.size or 0,
                          store=Store(parent))]
    files = [f for f in store.list_files(pattern) if file_type != "auto" or
             PurePosixPath(f.relative).suffix.lower() in SUPPORTED]
    if not files:
        raise InputError(f"no input files in {uri} (supported: {', '.join(SUPPORTED)})")
    return [InputFile(f"{uri}/{f.relative}", f.relative, f.mtime_s, f.size, store=store) for f in files]


def _kind(ctx: StepContext, file: InputFile) -> str:
    return ctx.settings.input.file_type if ctx.settings.input.file_type != "auto" else SUPPORTED[file.suffix]


def check_columns(ctx: StepContext, files: list[InputFile]) -> None:
    """Fail before any work (Ray, LLM) when a table-like input lacks the text column: read headers only."""
    cfg = ctx.settings.input
    for file in files:
        kind = _kind(ctx, file)
        if kind not in ("csv", "parquet"):
            continue
        try:
            source = file.path if file.path is not None else io.BytesIO(file.read_bytes())
            if kind == "csv":
                columns = pl.read_csv(source, n_rows=0, infer_schema=False, encoding="utf8-lossy").columns
            else:
                columns = pl.read_parquet_schema(source).keys()
        except (OSError, pl.exceptions.PolarsError):
            continue  # unreadable: recorded in failures by the step itself
        if cfg.text_column not in columns:
            raise InputError(f"{file.source}: no '{cfg.text_column}' column (input.text_column); it has: "
                             f"{', '.join(columns) or 'no columns'}")


class LoadDocuments(BatchStep):
    name = "load_documents"
    writes = ("documents", "failures")

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        docs: list[dict] = []
        failures: list[dict] = []
        for file in discover(ctx):
            kind = _kind(ctx, file)
            try:
                rows = _read(file, kind, ctx)
            except InputError:
                raise
            except (UnicodeDecodeError, ValueError, OSError, pl.exceptions.PolarsError) as exc:
                failures.append(_failure(file, f"unreadable {kind} file: {type(exc).__name__}: {str(exc)[:200]}"))
                continue
            created = dt.datetime.fromtimestamp(file.mtime or 0, dt.timezone.utc).isoformat()
            for row_index, row in enumerate(rows):
                docs.append({**row, "source": file.source, "row": row_index, "creation_date": created})
        return {"documents": _finish(docs, failures, ctx), "failures": pl.DataFrame(failures, schema=_FAIL)}


_FAIL = {"step": pl.String, "item_id": pl.String, "source": pl.String, "reason": pl.String}


def _failure(file: InputFile, reason: str) -> dict:
    return {"step": "load_documents", "item_id": file.name, "source": file.source, "reason": reason}


def _source(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _read(file: InputFile, kind: str, ctx: StepContext) -> list[dict]:
    cfg = ctx.settings.input
    raw = file.read_bytes()
    if b"\x00" in raw[:8192] and kind != "parquet":
        raise ValueError("binary file (NUL bytes), not text")
    if kind == "text":
        return [{"title": PurePosixPath(file.name).name, "text": raw.decode(cfg.encoding), "meta": {}}]
    if kind == "parquet":
        frame = pl.read_parquet(io.BytesIO(raw))
    elif kind == "csv":
        text = raw.decode(cfg.encoding)
        frame = pl.read_csv(text.encode("utf-8"), infer_schema=False, truncate_ragged_lines=True)
    else:
        text = raw.decode(cfg.encoding)
        records = [json.loads(line) for line in text.splitlines() if line.strip()] if kind == "jsonl" \
            else json.loads(text)
        records = records if isinstance(records, list) else [records]
        if not all(isinstance(r, dict) for r in records):
            raise ValueError("expected JSON objects")
        frame = pl.DataFrame([{k: v if isinstance(v, str) or v is None else json.dumps(v, ensure_ascii=False)
                               for k, v in r.items()} for r in records], infer_schema_length=None)
    if cfg.text_column not in frame.columns:
        raise InputError(f"{file.source}: no '{cfg.text_column}' column (input.text_column); it has: "
                         f"{', '.join(frame.columns) or 'no columns'}")
    out = []
    for i, row in enumerate(frame.iter_rows(named=True)):
        meta = {k: v for k, v in row.items() if k not in (cfg.text_column, cfg.title_column, cfg.id_column)}
        title = row.get(cfg.title_column)
        out.append({"given_id": row.get(cfg.id_column), "title": str(title) if title is not None else
                    f"{PurePosixPath(file.name).name}#{i}", "text": row.get(cfg.text_column), "meta": meta})
    return out


def _finish(docs: list[dict], failures: list[dict], ctx: StepContext) -> pl.DataFrame:
    out, seen = [], {}
    for doc in docs:
        label = str(doc.get("given_id") or f"{doc['source']}#{doc['row']}")
        text = doc.get("text")
        if text is None or not str(text).strip():
            failures.append({"step": "load_documents", "item_id": label, "source": doc["source"],
                             "reason": "document has no text"})
            continue
        given = doc.get("given_id")
        key = f"id:{given}" if given not in (None, "") else f"src:{doc['source']}#{doc['row']}"
        if key in seen:
            failures.append({"step": "load_documents", "item_id": label, "source": doc["source"],
                             "reason": f"duplicate document id '{given}' (first seen in {seen[key]}); skipped"})
            continue
        seen[key] = doc["source"]
        out.append({"id": content_id("document", key, doc["title"], text), "human_readable_id": len(out),
                    "title": doc["title"], "text": str(text), "text_unit_ids": [],
                    "creation_date": doc["creation_date"],
                    "raw_data": json.dumps({**doc["meta"], "source": doc["source"],
                                            **({"input_id": given} if given not in (None, "") else {})},
                                           ensure_ascii=False, default=str)})
    return pl.DataFrame(out, schema={"id": pl.String, "human_readable_id": pl.Int64, "title": pl.String,
                                     "text": pl.String, "text_unit_ids": pl.List(pl.String),
                                     "creation_date": pl.String, "raw_data": pl.String})


STEP = LoadDocuments()
