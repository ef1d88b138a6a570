"""Prompt texts: ROOT/<path> when the project overrides it, else the packaged default of the same name."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from graphrag_ray.errors import ConfigError


@lru_cache(maxsize=1)
def default_prompts() -> dict[str, str]:
    folder = resources.files("graphrag_ray._configs") / "prompts"
    return {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir() if p.name.endswith(".txt")}


def load_prompt(root: Path | None, relative_path: str) -> str:
    if root is not None and (Path(root) / relative_path).exists():
        return (Path(root) / relative_path).read_text(encoding="utf-8")
    name = Path(relative_path).name
    if name in default_prompts():
        return default_prompts()[name]
    raise ConfigError(f"prompt file {Path(root or '.') / relative_path} not found")


_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{(\w+)\}")


def fill(template: str, **values: Any) -> str:
    """Fill `{name}` placeholders in one pass (values are never re-scanned, so text containing `{x}` is safe);
    `{{`/`}}` become literal braces, as with str.format; unknown placeholders stay as they are."""

    def replace(match: re.Match) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        return str(values[name]) if name in values else token

    return _PLACEHOLDER.sub(replace, template)
