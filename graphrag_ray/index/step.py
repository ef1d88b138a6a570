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

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from graphrag_ray.config.prompts import fill, load_prompt  # noqa: F401  (fill: steps import it from here)
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
            self.prompts[relative_path] = load_prompt(self.root, relative_path)
        return self.prompts[relative_path]


class BatchStep(ABC):
    name: str = ""
    reads: tuple[str, ...] = ()
    optional_reads: tuple[str, ...] = ()  # given when an earlier step of the method wrote them
    writes: tuple[str, ...] = ()

    @abstractmethod
    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        """The step's output tables from its input tables."""


class ItemStep(ABC):
    name: str = ""
    reads: tuple[str, ...] = ()
    optional_reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    partial: dict[str, dict] = {}       # tables each partition yields (besides failures), with their schemas
    partition_size: int | None = None   # None: settings.workers.partition_size
    uses_llm: bool = True

    def rounds(self, ctx: StepContext, tables: Tables) -> int:
        return 1

    @abstractmethod
    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        """The work items of one round."""

    async def process(self, ctx: StepContext, item: dict, models: Any) -> Rows:
        """Rows for one item. A step that batches its own calls defines process_batch instead."""
        raise TypeError(f"step {self.name} defines neither process nor process_batch")

    process_batch = None  # optional: async (ctx, items, models) -> Rows

    @abstractmethod
    def finish(self, ctx: StepContext, tables: Tables, partial: Tables) -> Tables:
        """The step's output tables from every partition's rows."""
