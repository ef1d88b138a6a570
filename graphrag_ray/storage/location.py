"""Where input, output and cache live: a local (or shared-filesystem) path, or an object-storage URI
(`s3://bucket/prefix`, `gs://bucket/prefix`, `file:///abs/path`, ...) reached through pyarrow's filesystems.

Credentials and endpoints come from each store's usual environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
AWS_REGION / AWS_ENDPOINT_URL for S3-compatible stores; GOOGLE_APPLICATION_CREDENTIALS for GCS), never from the
settings file. Writes are atomic in both worlds: locally a temp name and a rename, in an object store a single
PUT (an object appears whole or not at all).
"""

from __future__ import annotations

import fnmatch
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs

from graphrag_ray.errors import InputError


def write_atomic_bytes(path: str | Path, data: bytes) -> None:
    """A local file written whole or not at all: a hidden temp name, then a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def is_uri(location: str | Path) -> bool:
    return isinstance(location, str) and "://" in location


def resolve(root: str | Path, location: str) -> str | Path:
    """A setting's value made concrete: URIs as they are, relative paths under the project root."""
    if is_uri(location):
        return location.rstrip("/")
    path = Path(location)
    return path if path.is_absolute() else Path(root) / path


def as_location(value: str | Path) -> str | Path:
    """A command-line path or URI: URIs stay strings (Path would fold "s3://" into "s3:/")."""
    return str(value).rstrip("/") if is_uri(str(value)) else Path(value)


@dataclass(frozen=True)
class StoredFile:
    relative: str  # path below the store's folder, with "/" separators
    size: int
    mtime_s: float | None


class Store:
    """A folder on some filesystem: read, write (atomically), list, upload."""

    def __init__(self, location: str | Path):
        self.location = str(location).rstrip("/")
        if is_uri(location):
            try:
                self.fs, self.path = pafs.FileSystem.from_uri(self.location)
            except (ValueError, OSError) as exc:
                raise InputError(f"cannot open {self.location}: {exc}") from None
        else:
            self.fs, self.path = pafs.LocalFileSystem(), str(Path(location).resolve())
        self.path = self.path.rstrip("/")
        self.remote = not isinstance(self.fs, pafs.LocalFileSystem)

    def child(self, relative: str) -> "Store":
        return Store(f"{self.location}/{relative}")

    def _full(self, relative: str) -> str:
        return f"{self.path}/{relative}" if relative else self.path

    def info(self, relative: str = "") -> pafs.FileInfo:
        return self.fs.get_file_info(self._full(relative))

    def read_bytes(self, relative: str = "") -> bytes | None:
        """The file's content, or None when it does not exist."""
        try:
            with self.fs.open_input_stream(self._full(relative)) as stream:
                return stream.read()
        except FileNotFoundError:
            return None
        except OSError as exc:  # object stores report a missing key as a generic OSError
            if self.info(relative).type == pafs.FileType.NotFound:
                return None
            raise exc

    def write_bytes(self, relative: str, data: bytes) -> None:
        target = self._full(relative)
        if not self.remote:
            write_atomic_bytes(target, data)
            return
        with self.fs.open_output_stream(target) as stream:
            stream.write(data)

    def list_files(self, pattern: str | None = None) -> list[StoredFile]:
        """Every file below the folder (recursive), hidden names (`.`/`_`) skipped, sorted; `pattern` is a glob
        on the relative path ("**/*.csv", "*.txt")."""
        selector = pafs.FileSelector(self.path, recursive=True, allow_not_found=True)
        out = []
        for info in self.fs.get_file_info(selector):
            if info.type != pafs.FileType.File:
                continue
            relative = info.path[len(self.path):].lstrip("/")
            if any(part.startswith((".", "_")) for part in relative.split("/")):
                continue
            if pattern and not (fnmatch.fnmatch(relative, pattern) or
                                fnmatch.fnmatch(relative, pattern.removeprefix("**/"))):
                continue
            mtime = info.mtime.timestamp() if info.mtime is not None else None
            out.append(StoredFile(relative, info.size or 0, mtime))
        return sorted(out, key=lambda f: f.relative)

    def upload_tree(self, local_dir: Path, relative: str) -> None:
        """Copy a local folder below this store (each file one atomic write)."""
        for path in sorted(Path(local_dir).rglob("*")):
            if path.is_file():
                self.write_bytes(f"{relative}/{path.relative_to(local_dir).as_posix()}", path.read_bytes())

    def delete_tree(self, relative: str) -> None:
        try:
            self.fs.delete_dir(self._full(relative))
        except (FileNotFoundError, OSError):
            pass
