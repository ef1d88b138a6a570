"""Deterministic content-hash ids, and the name normalisation entities are merged by."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata


def content_id(*parts: object) -> str:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()
    return digest[:32]


_SPACE = re.compile(r"\s+")


def normalize_name(name: str) -> str:
    """Merge key of an entity name: NFKC (folds full-width letters/digits), whitespace collapsed, case folded.
    Chinese and other scripts without case are kept exactly as written (NFKC leaves CJK ideographs alone)."""
    folded = unicodedata.normalize("NFKC", name)
    folded = _SPACE.sub(" ", folded).strip().strip("\"'“”‘’").strip()
    return folded.casefold()


def document_source(raw_data: str | None) -> str:
    """Where a document comes from, from its `raw_data`: its input id, or its file and row. It stays the same when
    the document is edited (its id, a hash of its content, does not)."""
    meta = json.loads(raw_data or "{}")
    return str(meta["input_id"]) if "input_id" in meta else f"{meta.get('source', '')}#{meta.get('row', '')}"
