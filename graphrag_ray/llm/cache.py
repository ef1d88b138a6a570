"""Content-addressed LLM response cache.

Key: sha256 of (model, messages, parameters, response_format) - the model is part of the key, the API
key and endpoint are not (they never reach the cache). One JSON file per entry under a two-letter fan-out;
written to a unique temp name and renamed, so any number of writers in any number of processes (or
nodes, when the folder is on shared storage) never expose a partial entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any


def cache_key(kind: str, model: str, payload: dict[str, Any]) -> str:
    material = json.dumps({"kind": kind, "model": model, **payload}, sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"), default=str)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, base_dir: str | Path | None):
        self.base_dir = Path(base_dir) if base_dir else None

    @property
    def enabled(self) -> bool:
        return self.base_dir is not None

    def _path(self, key: str) -> Path:
        assert self.base_dir is not None
        return self.base_dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        if not self.enabled:
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{key}.{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)

    def __getstate__(self):
        return {"base_dir": str(self.base_dir) if self.base_dir else None}

    def __setstate__(self, state):
        self.base_dir = Path(state["base_dir"]) if state["base_dir"] else None
