"""Content-addressed LLM response cache.

Key: sha256 of (model, messages, parameters, response_format) - the model is part of the key, the API
key and endpoint are not (they never reach the cache).

In a folder (local or a shared filesystem) entries are appended to segment files, one per writing process
and shard (`segments/<first hex digit of the key>/<host>-<pid>-<id>.seg`), each record
`<key> <length>\n<json>\n`. Creating a file per entry cost 0.4-0.7 ms of system CPU per LLM call here (a tenth
of the engine's CPU per call; far more on NFS), an append costs microseconds. A process indexes a shard's record
headers on its first lookup there and re-reads what other processes appended since at most once a second, on a
miss; a record that is not complete yet (or was cut by a crash) is not indexed, so nobody ever reads a partial
entry. Entries of the earlier one-file-per-entry layout (`ab/<key>.json`) are still read. An object store has
no append: there, one object per entry.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import socket
import threading
import time
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

    @property
    def enabled(self) -> bool:
        return self.base_dir is not None

    def get(self, key: str) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        data = SegmentLog.of(self.base_dir, key).read(key)
        if data is None:  # an entry of the one-file-per-entry layout
            try:
                with open(f"{self.base_dir}/{entry_name(key)}", "rb") as handle:
                    data = handle.read()
            except FileNotFoundError:
                return None
        return _decode(data)

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self.enabled:
            SegmentLog.of(self.base_dir, key).append(key, _encode(value))

    def __getstate__(self):
        return {"base_dir": str(self.base_dir) if self.base_dir else None}

    def __setstate__(self, state):
        self.base_dir = Path(state["base_dir"]) if state["base_dir"] else None


SEGMENTS_DIR = "segments"
RESCAN_INTERVAL_S = 1.0  # a miss re-reads other processes' new records at most this often
_HEADER = re.compile(rb"([0-9a-f]{64}) (\d+)\n")


class SegmentLog:
    """One shard folder's segments as this process sees them: an index of every complete record, and this
    process's own segment, appended to under a lock (worker threads and event loops share it)."""

    _by_folder: dict[tuple[str, int], "SegmentLog"] = {}
    _registry_lock = threading.Lock()

    @classmethod
    def of(cls, base_dir: Path, key: str) -> "SegmentLog":
        """The log of `key`'s shard: 16 shards by the key's first hex digit, so a process's first lookup reads
        the record headers of a sixteenth of the cache (a query's first miss in an index-sized cache)."""
        folder = f"{base_dir}/{SEGMENTS_DIR}/{key[0]}"
        registry_key = (folder, os.getpid())  # a forked child writes its own segments
        log = cls._by_folder.get(registry_key)
        if log is None:
            with cls._registry_lock:
                log = cls._by_folder.setdefault(registry_key, cls(Path(folder)))
        return log

    def __init__(self, folder: Path):
        self.folder = folder
        self.lock = threading.Lock()
        self.index: dict[str, tuple[str, int, int]] = {}  # key -> (segment, payload offset, payload length)
        self.parsed: dict[str, int] = {}  # segment -> bytes of complete records indexed so far
        self.last_scan = float("-inf")
        self.writer: tuple[int, str] | None = None  # (fd, segment name)
        self.written = 0

    def read(self, key: str) -> bytes | None:
        with self.lock:
            where = self.index.get(key)
            if where is None and time.monotonic() - self.last_scan >= RESCAN_INTERVAL_S:
                self._scan()
                where = self.index.get(key)
        if where is None:
            return None
        name, offset, length = where
        try:
            fd = os.open(self.folder / name, os.O_RDONLY)
        except FileNotFoundError:  # the cache folder was deleted under us: forget that segment
            self._forget(name)
            return None
        try:
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        return data if len(data) == length else None

    def _forget(self, name: str) -> None:
        with self.lock:
            self.index = {k: v for k, v in self.index.items() if v[0] != name}
            self.parsed.pop(name, None)
            if self.writer is not None and self.writer[1] == name:
                os.close(self.writer[0])
                self.writer = None  # the next append starts a new segment

    def append(self, key: str, payload: bytes) -> None:
        header = f"{key} {len(payload)}\n".encode("ascii")
        record = header + payload + b"\n"
        with self.lock:
            if self.writer is None:
                self._open_writer()
            fd, name = self.writer
            done = os.write(fd, record)
            if done != len(record):  # disk full or similar: this segment now ends in a torn record
                os.close(fd)
                self.writer = None
                raise OSError(f"cache segment {self.folder / name}: short write ({done} of {len(record)} bytes)")
            self.index[key] = (name, self.written + len(header), len(payload))
            self.written += len(record)
            self.parsed[name] = self.written

    def _open_writer(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.seg"
        fd = os.open(self.folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self.writer, self.written = (fd, name), 0

    def _scan(self) -> None:
        self.last_scan = time.monotonic()
        try:
            entries = list(os.scandir(self.folder))
        except FileNotFoundError:
            return
        for entry in entries:
            if entry.name.startswith(".") or not entry.name.endswith(".seg"):
                continue
            start = self.parsed.get(entry.name, 0)
            try:
                size = entry.stat().st_size
            except FileNotFoundError:
                continue
            if size > start:
                self.parsed[entry.name] = self._parse(entry.name, start, size)

    def _parse(self, name: str, start: int, size: int) -> int:
        """Index the complete records between `start` and `size`; returns where the complete ones end."""
        with open(self.folder / name, "rb") as handle:
            handle.seek(start)
            position = start
            while position < size:
                match = _HEADER.fullmatch(handle.readline(80))
                if match is None:
                    break
                length = int(match.group(2))
                payload_at = position + len(match.group(0))
                end = payload_at + length + 1
                if end > size:
                    break
                handle.seek(payload_at + length)
                if handle.read(1) != b"\n":
                    break
                self.index.setdefault(match.group(1).decode("ascii"), (name, payload_at, length))
                position = end
        return position


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
