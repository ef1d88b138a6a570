"""Content-addressed LLM response cache.

Key: sha256 of (model, messages, parameters, response_format) - the model is part of the key, the API
key and endpoint are not (they never reach the cache). One JSON file per entry under a two-letter fan-out;
written to a unique temp name and renamed, so any number of writers in any number of processes (or
nodes, when the folder is on shared storage) never expose a partial entry.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np


def cache_key(kind: str, model: str, payload: dict[str, Any]) -> str:
    material = json.dumps({"kind": kind, "model": model, **payload}, sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"), default=str)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def entry_name(key: str) -> str:
    """An entry's path below the cache folder: a two-letter fan-out keeps folders small."""
    return f"{key[:2]}/{key}.json"


def _encode(value: dict[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def _decode(data: bytes | None) -> dict[str, Any] | None:
    try:
        return json.loads(data) if data is not None else None
    except json.JSONDecodeError:
        return None


class ResponseCache:
    def __init__(self, base_dir: str | Path | None):
        self.base_dir = Path(base_dir) if base_dir else None
        self._made_dirs: set[str] = set()  # fan-out folders known to exist: one mkdir per folder, not per put

    @property
    def enabled(self) -> bool:
        return self.base_dir is not None

    def get(self, key: str) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        try:
            with open(f"{self.base_dir}/{entry_name(key)}", "rb") as handle:
                return _decode(handle.read())
        except FileNotFoundError:
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        if not self.enabled:
            return
        # Plain os calls: this runs once per LLM call, and pathlib's layers cost more than the write itself.
        folder = f"{self.base_dir}/{key[:2]}"
        if folder not in self._made_dirs:
            os.makedirs(folder, exist_ok=True)
            self._made_dirs.add(folder)
        tmp = f"{folder}/.{key}.{uuid.uuid4().hex}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, _encode(value))
        finally:
            os.close(fd)
        os.replace(tmp, f"{self.base_dir}/{entry_name(key)}")

    def __getstate__(self):
        return {"base_dir": str(self.base_dir) if self.base_dir else None}

    def __setstate__(self, state):
        self.base_dir = Path(state["base_dir"]) if state["base_dir"] else None
        self._made_dirs = set()


class ObjectStoreCache(ResponseCache):
    """The same cache in an object store (cache.base_dir: s3://... or gs://...), shared by every node without
    a shared filesystem. One object per entry; a PUT is atomic, so no temp names are needed."""

    def __init__(self, location: str):
        from graphrag_ray.storage.location import Store

        self.location = location
        self.store = Store(location)
        self.base_dir = None

    @property
    def enabled(self) -> bool:
        return True

    def get(self, key: str) -> dict[str, Any] | None:
        return _decode(self.store.read_bytes(entry_name(key)))

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.store.write_bytes(entry_name(key), _encode(value))

    def __getstate__(self):
        return {"location": self.location}

    def __setstate__(self, state):
        self.__init__(state["location"])


def open_cache(location: str | Path | None) -> ResponseCache:
    """A local (or shared-filesystem) folder, an object-store URI, or None (caching off)."""
    from graphrag_ray.storage.location import is_uri

    return ObjectStoreCache(str(location)) if is_uri(location) else ResponseCache(location)


def pack_vectors(vectors: list[list[float]]) -> dict[str, Any]:
    """Embedding vectors as base64 float32 (what endpoints send): ~10x faster to write than JSON floats, and
    exact, since the SDK decoded them from float32 in the first place."""
    array = np.asarray(vectors, dtype=np.float32)
    return {"vectors_f32": base64.b64encode(array.tobytes()).decode("ascii"), "shape": list(array.shape)}


def unpack_vectors(entry: dict[str, Any]) -> list[list[float]]:
    if "vectors" in entry:  # entries written before the packed format
        return entry["vectors"]
    array = np.frombuffer(base64.b64decode(entry["vectors_f32"]), dtype=np.float32)
    return array.reshape(entry["shape"]).tolist()
