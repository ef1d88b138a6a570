"""Input documents: find the files (a folder, a glob, one file, or an object-store prefix: storage/location.py),
check table-like files have the text column before any work, and read each file's rows. Read here: csv / txt /
md / json / jsonl / parquet, UTF-8 (Chinese included); PDF, Word, PowerPoint, Excel, HTML and EPUB files are parsed
by their own step (parse_documents, index/formats.py) and their text reaches load_documents from it."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

import polars as pl

from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import InputError
from graphrag_ray.index.formats import CONVERTED, markdown_marks
from graphrag_ray.storage.location import FoundFile, find_files, resolve

READ = {".csv": "csv", ".txt": "text", ".md": "text", ".json": "json", ".jsonl": "jsonl", ".parquet": "parquet"}
SUPPORTED = READ | CONVERTED


def discover(settings: Settings, root) -> list[FoundFile]:
    """The input files to read (with `file_type: auto`, those of a supported type)."""
    files, _ = _found(settings, root)
    if not files:
        raise InputError(
            f"no input files in {resolve(root, settings.input.base_dir)} (supported: {', '.join(SUPPORTED)})"
        )
    return files


def unsupported(settings: Settings, root) -> list[FoundFile]:
    """The files found at the input location but not of a type read (an image, an old .doc): each is a failures
    row, not dropped unsaid."""
    return _found(settings, root)[1]


def _found(settings: Settings, root) -> tuple[list[FoundFile], list[FoundFile]]:
    cfg = settings.input
    files = find_files(resolve(root, cfg.base_dir), cfg.file_pattern, root)
    if cfg.file_type != "auto":
        return files, []
    read = [f for f in files if PurePosixPath(f.name).suffix.lower() in SUPPORTED]
    return read, [f for f in files if PurePosixPath(f.name).suffix.lower() not in SUPPORTED]


def kind_of(settings: Settings, file: FoundFile) -> str:
    return (
        settings.input.file_type
        if settings.input.file_type != "auto"
        else SUPPORTED[PurePosixPath(file.name).suffix.lower()]
    )


def check_columns(settings: Settings, files: list[FoundFile]) -> None:
    """Fail before any work (Ray, LLM) when a table-like input lacks the text column: read headers only."""
    cfg = settings.input
    for file in files:
        kind = kind_of(settings, file)
        if kind not in ("csv", "parquet"):
            continue
        try:
            source = file.readable()
            if kind == "csv":
                columns = pl.read_csv(source, n_rows=0, infer_schema=False, encoding="utf8-lossy").columns
            else:
                columns = pl.read_parquet_schema(source).keys()
        except (OSError, pl.exceptions.PolarsError):
            continue  # unreadable: recorded in failures by the step itself
        if cfg.text_column not in columns:
            raise InputError(
                f"{file.source}: no '{cfg.text_column}' column (input.text_column); it has: "
                f"{', '.join(columns) or 'no columns'}"
            )


def read_rows(settings: Settings, file: FoundFile) -> list[dict]:
    """The documents of one file: [{given_id, title, text, meta}]. Raises ValueError / OSError / PolarsError for an
    unreadable file, InputError for one without the text column."""
    cfg = settings.input
    kind = kind_of(settings, file)
    raw = file.read_bytes()
    if b"\x00" in raw[:8192] and kind != "parquet":
        raise ValueError("binary file (NUL bytes), not text")
    if kind == "text":
        text = raw.decode(cfg.encoding)
        # a Markdown file's headings are its structure: its text units say which section they are in
        marks = markdown_marks(text) if PurePosixPath(file.name).suffix.lower() == ".md" else []
        meta = {"structure": {"format": "md", "marks": marks}} if marks else {}
        return [{"title": PurePosixPath(file.name).name, "text": text, "meta": meta}]
    if kind == "parquet":
        import io

        frame = pl.read_parquet(io.BytesIO(raw))
    elif kind == "csv":
        text = raw.decode(cfg.encoding)
        frame = pl.read_csv(text.encode("utf-8"), infer_schema=False, truncate_ragged_lines=True)
    else:
        text = raw.decode(cfg.encoding)
        records = (
            [json.loads(line) for line in text.splitlines() if line.strip()] if kind == "jsonl" else json.loads(text)
        )
        records = records if isinstance(records, list) else [records]
        if not all(isinstance(r, dict) for r in records):
            raise ValueError("expected JSON objects")
        frame = pl.DataFrame(
            [
                {k: v if isinstance(v, str) or v is None else json.dumps(v, ensure_ascii=False) for k, v in r.items()}
                for r in records
            ],
            infer_schema_length=None,
        )
    if cfg.text_column not in frame.columns:
        raise InputError(
            f"{file.source}: no '{cfg.text_column}' column (input.text_column); it has: "
            f"{', '.join(frame.columns) or 'no columns'}"
        )
    out = []
    for i, row in enumerate(frame.iter_rows(named=True)):
        meta = {k: v for k, v in row.items() if k not in (cfg.text_column, cfg.title_column, cfg.id_column)}
        title = row.get(cfg.title_column)
        out.append(
            {
                "given_id": row.get(cfg.id_column),
                "title": str(title) if title is not None else f"{PurePosixPath(file.name).name}#{i}",
                "text": row.get(cfg.text_column),
                "meta": meta,
            }
        )
    return out
