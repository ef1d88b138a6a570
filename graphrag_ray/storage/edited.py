"""Files a user edits (settings, prompts): a command that rewrites one keeps what was there."""

from __future__ import annotations

import time
from pathlib import Path


def replace_keeping_copy(path: Path, text: str) -> Path | None:
    """Write `text` to `path`; when the file held something else, it is first renamed to
    `NAME.YYYYmmdd-HHMMSS.bak` beside it (never over an earlier copy). Returns the copy's path, or None."""
    path = Path(path)
    copy = None
    if path.exists() and path.read_text(encoding="utf-8", errors="replace") != text:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        copy = path.with_name(f"{path.name}.{stamp}.bak")
        n = 1
        while copy.exists():
            copy, n = path.with_name(f"{path.name}.{stamp}-{n}.bak"), n + 1
        path.rename(copy)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return copy
