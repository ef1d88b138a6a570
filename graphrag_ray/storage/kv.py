"""Key-value blobs for the LLM response cache, on either backend.

In a folder (local or a shared filesystem) values are appended to segment files, one per writing process and
shard (`segments/<first hex digit of the key>/<host>-<pid>-<id>.seg`), each record `<key> <length>\n<value>\n`:
creating a file per entry costs far more system CPU than an append (and far more again on NFS). A process indexes
a shard's record headers on its first lookup there and re-reads what other processes appended since at most once a
second, on a miss; a record that is not complete yet (or was cut by a crash) is not indexed, so nobody ever reads a
partial value. An object store has no append: there, one object per key (a PUT is atomic).
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path

from graphrag_ray.storage.location import Store, is_uri

SEGMENTS_DIR = "segments"
RESCAN_INTERVAL_S = 1.0  # a miss re-reads other processes' new records at most this often
_HEADER = re.compile(rb"([0-9a-f]{64}) (\d+)\n")


class KeyValueStore(ABC):
    """`get(key) -> bytes | None`, `put(key, bytes)`; keys are 64-hex-digit digests. Pickles as its location."""

    def __init__(self, location: str | Path):
        self.location = str(location)

    @abstractmethod
    def get(self, key: str) -> bytes | None:
        """The value, or None when the key was never written (or its record is not whole yet)."""

    @abstractmethod
    def put(self, key: str, value: bytes) -> None:
        """Store the value; readers see all of it or nothing."""

    @abstractmethod
    def drop_where(self, condition) -> tuple[int, int]:
        """Remove every value for which `condition(value bytes)` holds; (dropped, kept). Not while others write."""

    def __reduce__(self):
        return (open_kv, (self.location,))


def open_kv(location: str | Path) -> KeyValueStore:
    """Segment logs in a folder, or one object per key under an object-store URI."""
    return ObjectKV(location) if is_uri(location) else SegmentKV(location)


class SegmentKV(KeyValueStore):
    def __init__(self, location: str | Path):
        super().__init__(location)
        self.folder = Path(location)

    def get(self, key: str) -> bytes | None:
        return SegmentLog.of(self.folder, key).read(key)

    def put(self, key: str, value: bytes) -> None:
        SegmentLog.of(self.folder, key).append(key, value)

    def drop_where(self, condition) -> tuple[int, int]:
        """Each shard's segments rewritten as one, without the dropped records: the new segment is whole on disk
        (written under a hidden name, then renamed) before the old ones go."""
        dropped = kept = 0
        for shard in sorted((self.folder / SEGMENTS_DIR).glob("*")):
            old = sorted(p for p in shard.glob("*.seg"))
            if not old:
                continue
            log = SegmentLog(shard)
            log._scan()
            records = []
            for key, (name, offset, length) in sorted(log.index.items()):
                with open(shard / name, "rb") as handle:
                    handle.seek(offset)
                    value = handle.read(length)
                if condition(value):
                    dropped += 1
                else:
                    records.append(f"{key} {len(value)}\n".encode("ascii") + value + b"\n")
            kept += len(records)
            fresh = shard / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.seg"
            hidden = shard / f".{fresh.name}"
            hidden.write_bytes(b"".join(records))
            hidden.replace(fresh)
            for path in old:
                path.unlink(missing_ok=True)
        SegmentLog._by_folder.clear()  # this process's indexes point into the removed segments
        return dropped, kept


class ObjectKV(KeyValueStore):
    def __init__(self, location: str | Path):
        super().__init__(location)
        self.store = Store(location)

    @staticmethod
    def _name(key: str) -> str:
        return f"{key[:2]}/{key}.json"  # a two-letter fan-out keeps listings small

    def get(self, key: str) -> bytes | None:
        return self.store.read_bytes(self._name(key))

    def put(self, key: str, value: bytes) -> None:
        self.store.write_bytes(self._name(key), value)

    def drop_where(self, condition) -> tuple[int, int]:
        dropped = kept = 0
        for stored in self.store.list_files("*/*.json"):
            if condition(self.store.read_bytes(stored.relative) or b""):
                self.store.delete(stored.relative)
                dropped += 1
            else:
                kept += 1
        return dropped, kept


class SegmentLog:
    """One shard folder's segments as this process sees them: an index of every complete record, and this
    process's own segment, appended to under a lock (worker threads and event loops share it)."""

    _by_folder: dict[tuple[str, int], SegmentLog] = {}
    _registry_lock = threading.Lock()

    @classmethod
    def of(cls, base_dir: Path, key: str) -> SegmentLog:
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


class AppendFile:
    """One file that only grows, a line at a time: on a local or shared filesystem each `append` is one O_APPEND
    write (a crash loses at most the line being written); an object store has no append, so there the whole file is
    rewritten, at most every `every` seconds and at `flush`."""

    def __init__(self, folder: str | Path, name: str, every: float = 0.5):
        self.store, self.name, self.every = Store(folder), name, every
        self._local = self.store.local_path()
        self._fd: int | None = None
        self._written: list[bytes] = []
        self._written_at = 0.0

    def append(self, data: bytes, force: bool = False) -> None:
        if self._local is not None:
            if self._fd is None:
                self._local.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self._local / self.name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(self._fd, data)
            return
        self._written.append(data)
        now = time.monotonic()
        if force or now - self._written_at > self.every:
            self.store.write_bytes(self.name, b"".join(self._written))
            self._written_at = now

    def __del__(self):
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)


def read_lines(folder: str | Path, pattern: str) -> list[str]:
    """Every line of the files below `folder` matching `pattern` (AppendFile's), in file order."""
    store = Store(folder)
    return [
        line
        for stored in store.list_files(pattern)
        for line in (store.read_bytes(stored.relative) or b"").decode("utf-8", "replace").splitlines()
    ]
