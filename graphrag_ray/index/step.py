"""The step contract. Steps never import ray: the executor owns partitioning, actors, markers and progress.

A step has a name, the tables it reads and the tables it writes, and either
  * `run(ctx, tables) -> {table: DataFrame}` - a batch function over whole tables (merge, communities), or
  * item processing fanned out by the executor over partitions and actor pools:
      rounds(ctx, tables)                   how many dependent rounds (report levels); 1 by default
      items(ctx, tables, round, earlier)    work items (dicts with an "item_id"); `earlier` = prior rounds' rows
      async process(ctx, item, models)      rows per partial table for one item ({"failures": [...]} included)
        or async process_batch(ctx, items, models) for steps that batch their own calls (embeddings)
      finish(ctx, tables, partial)          the step's output tables from all partial rows
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from graphrag_ray.config.settings import Settings

Tables = dict[str, pl.DataFrame]
Rows = dict[str, list[dict[str, Any]]]


@dataclass
class StepContext:
    """What a step may use besides its tables: settings, the root and the prompt texts (picklable)."""

    settings: Settings
    root: Path
    prompts: dict[str, str] = field(default_factory=dict)

    def prompt(self, relative_path: str) -> str:
        if relative_path not in self.prompts:
            from graphrag_ray.api import default_prompts
            from graphrag_ray.errors import ConfigError

            path = self.root / relative_path
            if path.exists():
                self.prompts[relative_path] = path.read_text(encoding="utf-8")
            elif Path(relative_path).name in default_prompts():
                self.prompts[relative_path] = default_prompts()[Path(relative_path).name]
            else:
                raise ConfigError(f"prompt file {path} not found")
        return self.prompts[relative_path]


class BatchStep:
    name: str = ""
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        raise NotImplementedError


class ItemStep:
    name: str = ""
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    partial: dict[str, dict] = {}       # tables each partition yields (besides failures), with their schemas
    partition_size: int | None = None   # None: settings.workers.partition_size
    uses_llm: bool = True

    def rounds(self, ctx: StepContext, tables: Tables) -> int:
        return 1

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        raise NotImplementedError

    async def process(self, ctx: StepContext, item: dict, models: Any) -> Rows:
        raise NotImplementedError

    process_batch = None  # optional: async (ctx, items, models) -> Rows

    def finish(self, ctx: StepContext, tables: Tables, partial: Tables) -> Tables:
        raise NotImplementedError


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
