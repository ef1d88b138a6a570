"""Where input, output, runs and cache live: a local (or shared-filesystem) path, or an object-storage URI
(`s3://bucket/prefix`, `gs://bucket/prefix`, `file:///abs/path`, ...) reached through pyarrow's filesystems.

`Store` is the one interface the rest of the engine uses; which backend sits behind it is decided here and
nowhere else. Credentials and endpoints come from each store's usual environment (AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY / AWS_REGION / AWS_ENDPOINT_URL for S3-compatible stores; GOOGLE_APPLICATION_CREDENTIALS for
GCS), never from the settings file. Writes are atomic in both worlds: locally a temp name and a rename, in an
object store a single PUT (an object appears whole or not at all).
"""

from __future__ import annotations

import errno
import fnmatch
import glob as globlib
import io
import os
import shutil
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


def resolve(root: str | Path, location: str | Path) -> str | Path:
    """A setting's value made concrete: URIs as they are, relative paths under the project root."""
    if is_uri(location):
        return str(location).rstrip("/")
    path = Path(location)
    return path if path.is_absolute() else Path(root) / path


def resolve_if_rooted(root: str | Path | None, location: str | Path) -> str | Path | None:
    """`resolve`, except that a relative location with no project root has no home: None (nothing may be written
    into whatever the current directory is)."""
    if root is None and not is_uri(location) and not Path(location).is_absolute():
        return None
    return resolve(root or ".", location)


def as_location(value: str | Path) -> str | Path:
    """A command-line path or URI: URIs stay strings (Path would fold "s3://" into "s3:/")."""
    return str(value).rstrip("/") if is_uri(str(value)) else Path(value)


def _hidden(relative: str) -> bool:
    return any(part.startswith((".", "_")) for part in relative.split("/"))


@dataclass(frozen=True)
class StoredFile:
    relative: str  # path below the store's folder, with "/" separators
    size: int
    mtime_s: float | None


class Store:
    """A folder on some filesystem: read, write (atomically), list, delete."""

    def __init__(self, location: str | Path | Store):
        if isinstance(location, Store):
            location = location.location
        self.location = str(location).rstrip("/")
        if is_uri(self.location):
            try:
                self.fs, self.path = pafs.FileSystem.from_uri(self.location)
            except (ValueError, OSError) as exc:
                raise InputError(f"cannot open {self.location}: {exc}") from None
        else:
            self.fs, self.path = pafs.LocalFileSystem(), str(Path(self.location).resolve())
        self.path = self.path.rstrip("/")
        self.remote = not isinstance(self.fs, pafs.LocalFileSystem)

    def __repr__(self) -> str:
        return f"Store({self.location!r})"

    def __str__(self) -> str:
        return self.location

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Store) and (self.fs.type_name, self.path) == (other.fs.type_name, other.path)

    def __hash__(self) -> int:
        return hash(self.path)

    def __reduce__(self):  # pickled as its location: filesystems reconnect in the receiving process
        return (Store, (self.location,))

    def child(self, relative: str) -> Store:
        return Store(f"{self.location}/{relative}")

    def local_path(self, relative: str = "") -> Path | None:
        """The local path of `relative`, or None in an object store."""
        return None if self.remote else Path(self._full(relative))

    def _full(self, relative: str) -> str:
        return f"{self.path}/{relative}" if relative else self.path

    def info(self, relative: str = "") -> pafs.FileInfo:
        return self.fs.get_file_info(self._full(relative))

    def exists(self, relative: str = "") -> bool:
        return self.info(relative).type != pafs.FileType.NotFound

    def is_dir(self, relative: str = "") -> bool:
        return self.info(relative).type == pafs.FileType.Directory

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

    def copy_to(self, relative: str, destination: Path) -> bool:
        """Copy a file to a local path without holding it in memory where the store is local; False when the file
        does not exist."""
        local = self.local_path(relative)
        if local is not None:
            if not local.is_file():
                return False
            shutil.copyfile(local, destination)
            return True
        data = self.read_bytes(relative)
        if data is None:
            return False
        Path(destination).write_bytes(data)
        return True

    def local_tree(self, relative: str) -> Path | None:
        """The folder `relative` as a local path to read (from an object store: copied into a temporary folder,
        removed at exit); None when it does not exist."""
        local = self.local_path(relative)
        if local is not None:
            return local if local.is_dir() else None
        files = self.child(relative).list_files()
        if not files:
            return None
        import atexit
        import tempfile

        target = Path(tempfile.mkdtemp(prefix="graphrag-ray-"))
        atexit.register(shutil.rmtree, target, True)
        for f in files:
            (target / f.relative).parent.mkdir(parents=True, exist_ok=True)
            self.copy_to(f"{relative}/{f.relative}", target / f.relative)
        return target

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
            relative = info.path[len(self.path) :].lstrip("/")
            if _hidden(relative):
                continue
            if pattern and not (
                fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(relative, pattern.removeprefix("**/"))
            ):
                continue
            mtime = info.mtime.timestamp() if info.mtime is not None else None
            out.append(StoredFile(relative, info.size or 0, mtime))
        return sorted(out, key=lambda f: f.relative)

    def list_dirs(self) -> list[str]:
        """Names of the folders directly below (hidden names skipped), sorted."""
        selector = pafs.FileSelector(self.path, recursive=False, allow_not_found=True)
        return sorted(
            info.base_name
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.Directory and not _hidden(info.base_name)
        )

    def upload_tree(self, local_dir: Path, relative: str) -> None:
        """Copy a local folder below this store (each file one atomic write)."""
        for path in sorted(Path(local_dir).rglob("*")):
            if path.is_file():
                self.write_bytes(f"{relative}/{path.relative_to(local_dir).as_posix()}", path.read_bytes())

    def delete(self, relative: str) -> None:
        try:
            self.fs.delete_file(self._full(relative))
        except (FileNotFoundError, OSError):
            pass

    def delete_tree(self, relative: str = "") -> None:
        if not self.remote:
            target = Path(self._full(relative))
            if target.is_symlink() or target.is_file():
                target.unlink()
            else:
                shutil.rmtree(target, ignore_errors=True)
            return
        try:
            self.fs.delete_dir(self._full(relative))
        except (FileNotFoundError, OSError):
            pass


@dataclass(frozen=True)
class FoundFile:
    """A file found under an input location: its store and name there, and how reports name it."""

    store: Store
    name: str  # relative to `store`
    source: str  # as recorded in documents.raw_data and failures: relative to the root, or the full URI
    size: int
    mtime_s: float | None

    def read_bytes(self) -> bytes:
        local = self.store.local_path(self.name)
        if local is not None:  # a plain read: opening a filesystem stream per file adds up over a corpus of many
            try:
                return local.read_bytes()
            except FileNotFoundError:
                raise FileNotFoundError(self.source) from None
        data = self.store.read_bytes(self.name)
        if data is None:
            raise FileNotFoundError(self.source)
        return data

    def readable(self) -> Path | io.BytesIO:
        """Something Polars reads: the local path (so a header-only read reads only the header), or the
        object's bytes."""
        return self.store.local_path(self.name) or io.BytesIO(self.read_bytes())


def find_files(location: str | Path, pattern: str | None, root: Path) -> list[FoundFile]:
    """The files at an input location: a folder (recursive, `pattern` a glob below it), a single file or object,
    or a local glob such as `data/**/*.csv`. Hidden names are skipped; sorted by source."""
    if is_uri(location):
        store = Store(location)
        try:
            info = store.info()
        except OSError as exc:
            raise InputError(f"input {location} cannot be read: {exc}") from None
        if info.type == pafs.FileType.File:  # a single object
            parent, name = str(location).rsplit("/", 1)
            return [
                FoundFile(
                    Store(parent), name, str(location), info.size or 0, info.mtime.timestamp() if info.mtime else None
                )
            ]
        return [
            FoundFile(store, f.relative, f"{store.location}/{f.relative}", f.size, f.mtime_s)
            for f in store.list_files(pattern)
        ]
    base = Path(location)
    if any(ch in str(base) for ch in "*?["):
        paths = [Path(p) for p in globlib.glob(str(base), recursive=True)]
    elif base.is_dir():
        paths = list(base.glob(pattern or "**/*"))
    elif base.is_file():
        paths = [base]
    else:
        raise InputError(f"input folder {base} does not exist")
    found = []
    stores: dict[Path, Store] = {}  # one per folder: a Store resolves its path (a stat per path component)
    root = Path(root).resolve()
    for path in sorted(p for p in paths if p.is_file() and not p.name.startswith((".", "_"))):
        stat = path.stat()
        folder = stores.get(path.parent) or stores.setdefault(path.parent, Store(path.parent))
        found.append(
            FoundFile(
                folder, path.name, _relative_to(path, Path(folder.path) / path.name, root), stat.st_size, stat.st_mtime
            )
        )
    return found


def _relative_to(path: Path, resolved: Path, root: Path) -> str:
    """`path` relative to `root` (both resolved), or as given when outside it."""
    try:
        return str(resolved.relative_to(root))
    except ValueError:
        return str(path)


def disk_full(exc: BaseException) -> bool:
    """The device (or the user's quota) is full: an OSError saying so, or a library's error quoting the OS's
    message (Polars reports a failed Parquet write as `ComputeError: ... No space left on device (os error 28)`)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return any(words in str(exc) for words in ("No space left on device", "Disk quota exceeded"))
