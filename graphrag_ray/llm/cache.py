"""Content-addressed LLM response cache.

Key: sha256 of (model, messages, parameters, response_format) - the model is part of the key, the API key and
endpoint are not (they never reach the cache). Values are JSON; where they are kept (segment logs in a folder,
objects in a bucket) is storage's business (storage/kv.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphrag_ray.storage.kv import KeyValueStore, open_kv

if TYPE_CHECKING:
    import numpy as np


def cache_key(kind: str, model: str, payload: dict[str, Any]) -> str:
    material = json.dumps(
        {"kind": kind, "model": model, **payload},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class ResponseCache:
    """JSON values by key; `ResponseCache(None)` is a cache that is off (every get misses, puts are dropped)."""

    def __init__(self, store: KeyValueStore | None):
        self.store = store

    @property
    def enabled(self) -> bool:
        return self.store is not None

    def get(self, key: str) -> dict[str, Any] | None:
        data = self.store.get(key) if self.store is not None else None
        if data is None:
            return None
        try:
            return json.loads(data)
        except json.JSONDecodeError:
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self.store is not None:
            self.store.put(key, json.dumps(value, ensure_ascii=False).encode("utf-8"))

    def clear_stage(self, stage: str) -> tuple[int, int]:
        """Drop the cached answers of one stage (e.g. summarize_descriptions); (dropped, kept)."""
        if self.store is None:
            return 0, 0

        def of_stage(value: bytes) -> bool:
            try:
                return json.loads(value).get("stage") == stage
            except (ValueError, AttributeError):
                return False

        return self.store.drop_where(of_stage)


def open_cache(location: str | Path | None) -> ResponseCache:
    """A local (or shared-filesystem) folder, an object-store URI, or None (caching off)."""
    return ResponseCache(open_kv(location) if location else None)


def pack_vectors(vectors: np.ndarray | list[list[float]]) -> dict[str, Any]:
    """Embedding vectors as base64 float32 (what endpoints send): much faster to write than JSON floats, and
    exact, since they were float32 in the first place."""
    import numpy as np  # here: a command that embeds nothing (a global query) never loads it

    array = np.asarray(vectors, dtype=np.float32)
    return {"vectors_f32": base64.b64encode(array.tobytes()).decode("ascii"), "shape": list(array.shape)}


def pack_rows(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """A packed batch as one packed entry per vector (straight from its float32 bytes)."""
    rows, dim = entry["shape"]
    raw = base64.b64decode(entry["vectors_f32"])
    size = 4 * dim
    return [
        {"vectors_f32": base64.b64encode(raw[i * size : (i + 1) * size]).decode("ascii"), "shape": [1, dim]}
        for i in range(rows)
    ]


def unpack_vectors(entry: dict[str, Any]) -> np.ndarray:
    """The float32 matrix of a packed entry (rows are read-only views of it)."""
    import numpy as np

    return np.frombuffer(base64.b64decode(entry["vectors_f32"]), dtype=np.float32).reshape(entry["shape"])
