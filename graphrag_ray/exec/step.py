"""The step contract. Steps never import ray: the executor owns partitioning, workers, markers and progress.

A step has a name, the tables it reads and the tables it writes, says whether it calls models (`uses_llm`, and
which: `model_ids`, so a run checks exactly those endpoints before any work), counts what happens through
`stat_update` (datatrove's stats call; the executor adds the counts up per step into stats.json), and is either
  * a `BatchStep`: `run(ctx, tables) -> {table: DataFrame}` over whole tables (merge, communities), in the driver
    (with an optional `prepare(ctx)`, as an item step's plan below); the tables named in `lazy_reads` reach it as
    scans of the run's files, and a LazyFrame it returns is collected as it is written, one table at a time, or
  * an `ItemStep`, fanned out by the executor over partitions and workers. As Ray Data keeps the stateful
    operator on the driver and ships a stateless transform, it has two sides:
    - the driver's plan, an `ItemPlan` made fresh for each run (`step.plan()`) and never shipped; it may keep what
      it reads between its calls (the version being updated, the items of later rounds):
      prepare(ctx)                          driver work needing none of its tables, run beside the step before
      rounds(ctx, tables)                   how many dependent rounds (report levels); 1 by default
      items(ctx, tables, round, earlier)    work items (dicts with an "item_id", or a polars frame of them whose
                                            dicts are made a partition at a time: exec/items.py); `earlier` =
                                            prior rounds' rows
      finish(ctx, tables, yielded)          the step's output tables from the rows every item yielded
      A step whose plan needs no state writes rounds/items/finish as its own methods, which the default plan
      calls; one that does gives its own `Plan` class.
    - the step itself, shipped to workers with every partition (and shared with the driver by the in-process
      pool's workers), which holds no run state - its methods assign nothing to it (the architecture test):
      async process(ctx, item, models)      rows per table in `yields` for one item; a model call that cannot be
                                            had (LLMUnavailableError) becomes the item's failures row (worker.py)
        or async process_batch(ctx, items, models) for steps that batch their own calls (embeddings)
    A yield named in `spilled` (vectors: hundreds of MB at 10M tokens) is never gathered in the driver: `finish`
    gets a `SpilledRows`, the partition files holding its rows, and reads them one at a time.
    A step with `carries_results` has each item's rows kept with the digest of the item (exec/carried.py): an
    update takes the rows of items that did not change from the version it updates, and computes only the rest.
What a step reads and adds besides its tables it declares, and the run derives everything from the declarations:
  * `prompt_keys`: its settings section's keys naming the prompt files it reads - the graph's fingerprint, the run
    id and the prompt pre-check are made from them, and reading a prompt it did not declare fails (`running`);
  * `publishes`: which of its `writes` the published index keeps beyond the required tables (`publish` writes them);
  * `update_lines`: what it adds to an update's changes.json (how many reports were revised).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from graphrag_ray.config.prompts import load_prompt
from graphrag_ray.config.settings import Settings
from graphrag_ray.exec.items import Items
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.tables import read_table, write_table

Tables = dict[str, pl.DataFrame]
Rows = dict[str, list[dict[str, Any]]]

_STATS: ContextVar[Counter | None] = ContextVar("graphrag_ray_step_stats", default=None)
# the step whose code runs in this context and the prompt files it declared (None: not inside a step)
_DECLARED: ContextVar[tuple[str, frozenset[str]] | None] = ContextVar("graphrag_ray_step_prompts", default=None)


class UndeclaredPromptError(RuntimeError):
    """A step read a prompt file it does not declare: its fingerprint would miss it (a programming error)."""


@contextmanager
def collecting_stats() -> Iterator[Counter]:
    """Counts `stat_update` calls made in this context (and in tasks started from it)."""
    counts: Counter = Counter()
    token = _STATS.set(counts)
    try:
        yield counts
    finally:
        _STATS.reset(token)


@contextmanager
def running(step: Step, ctx: StepContext) -> Iterator[None]:
    """While a step's code runs (in the driver or a worker): the prompts it declared are all it may read."""
    token = _DECLARED.set((step.name, frozenset(step.prompts(ctx.settings, update=ctx.previous is not None))))
    try:
        yield
    finally:
        _DECLARED.reset(token)


@dataclass
class StepContext:
    """What a step may use besides its tables: settings, the root and the prompt texts (picklable)."""

    settings: Settings
    root: Path
    prompts: dict[str, str] = field(default_factory=dict)
    retry_unusable: bool = False  # `index --retry-failures`: an answer cached unusable twice is asked again
    previous: Store | None = None  # `update`: the published version this run updates (numbers carried over)
    paid_dir: str | None = None  # where the run's workers journal every paid call (llm/ledger.py PaidJournal)
    batch_dir: str | None = None  # where the run keeps the ids of its Batch API jobs (exec/batched.py)

    def previous_table(self, name: str) -> pl.DataFrame | None:
        """A table of the version being updated (None for a full build)."""
        return read_table(self.previous, name) if self.previous is not None else None

    def previous_carried(self, step: str, table: str) -> pl.DataFrame | None:
        """A step's carried rows in the version being updated (exec/carried.py; None for a full build)."""
        return read_table(self.previous.child(f"carried/{step}"), table) if self.previous is not None else None

    def prompt(self, relative_path: str) -> str:
        declared = _DECLARED.get()
        if declared is not None and relative_path not in declared[1]:
            raise UndeclaredPromptError(
                f"step {declared[0]} reads {relative_path}, which it does not declare "
                "(prompt_keys): the index's fingerprint would not change with it"
            )
        if relative_path not in self.prompts:
            self.prompts[relative_path] = load_prompt(self.root, relative_path)
        return self.prompts[relative_path]


class Step(ABC):  # noqa: B024 - abstract in kind: BatchStep and ItemStep are the steps
    name: str = ""
    reads: tuple[str, ...] = ()
    optional_reads: tuple[str, ...] = ()  # given when an earlier step of the method wrote them
    # of a table it reads, the only columns it uses: the step gets those alone (the documents' texts are 0.3 GB at
    # 100M tokens, and a step that wants their dates need not hold them); a large run also holds only those between
    # the step that writes the table and this one (exec/held.py)
    read_columns: dict[str, tuple[str, ...]] = {}
    # tables it reads as polars LazyFrames scanning the run's files, not held: a step that only passes them through
    # (finalize: the texts) returns LazyFrames too, and the executor collects and writes its tables one at a time
    lazy_reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    uses_llm: bool = False
    # the settings section the step reads (with uses_llm: the one naming its model, model_id): a change to it
    # changes the graph, so `update` refuses it - but for the keys in `update_keys`, which say only how an update
    # revises (the update prompts count as such keys too)
    settings_section: str | None = None
    update_keys: tuple[str, ...] = ()
    background: bool = False  # runs beside the steps after it until one reads what it writes (executor.py)
    # the settings_section keys naming the prompt files the step reads (`update_prompt_keys`: in an update only).
    # What decides the graph's fingerprint, the run id and the prompt pre-check is derived from these.
    prompt_keys: tuple[str, ...] = ()
    update_prompt_keys: tuple[str, ...] = ()
    slow_imports: tuple[str, ...] = ()  # modules it needs that take long to import: imported early, beside calls
    publishes: tuple[str, ...] = ()  # of `writes`, what the published index keeps besides the required tables
    # an update takes the rows of items the previous version already computed from it (exec/carried.py); only
    # for item steps whose rows come from `process`, one item at a time, and are not spilled
    carries_results: bool = False

    def enabled(self, settings: Settings) -> bool:
        """False when the step's settings section is switched off (it then reads no prompt and publishes nothing)."""
        return self.settings_section is None or getattr(getattr(settings, self.settings_section), "enabled", True)

    def graph_neutral_keys(self) -> tuple[str, ...]:
        """Keys of its settings section that do not change what the graph is (how an update revises)."""
        return (*self.update_keys, *self.update_prompt_keys)

    def model_ids(self, settings: Settings) -> list[str]:
        """The models this step will call with these settings (none when its section is disabled)."""
        if not self.uses_llm or self.settings_section is None:
            return []
        return [getattr(settings, self.settings_section).model_id] if self.enabled(settings) else []

    def prompts(self, settings: Settings, update: bool = False) -> list[str]:
        """The prompt files this step reads with these settings (none when its section is disabled)."""
        if self.settings_section is None or not self.enabled(settings):
            return []
        section = getattr(settings, self.settings_section)
        return [getattr(section, key) for key in self.prompt_keys + (self.update_prompt_keys if update else ())]

    def publish(self, ctx: StepContext, folder: Path, tables: Any, run: Store) -> None:
        """Write the tables this step `publishes` into the version being published (`run`: the run's files)."""
        if not self.enabled(ctx.settings):
            return
        for name in self.publishes:
            if name in tables:
                table = tables[name]
                write_table(table, folder, name, ctx.settings.output.partition_rows if "id" in table.columns else None)

    def estimate(self, corpus: Any) -> list:
        """What the step would call and cost on this corpus (index/estimate.py's Corpus: the text units counted,
        the graph projected), as StageEstimate rows; a step that calls no model adds none."""
        return []

    def update_lines(self, stats: dict) -> dict:
        """What this step adds to an update's changes.json (and stats.json), from its stats in this run."""
        return {}

    def stat_update(self, key: str, value: int = 1) -> None:
        """Count an event (a gleaning round, an unparsed record, a truncated answer) into this step's stats."""
        counts = _STATS.get()
        if counts is not None:
            counts[key] += value


def written_counts(stats: dict) -> dict:
    """An item step's items in an update, from its stats: written afresh, revised from the previous version's
    (its `revised` events), kept (carried unchanged), kept although a few of its rows changed (its
    `kept_small_change` events: community_reports.revise_min_changed_share,
    summarize_descriptions.keep_max_added_share)."""
    events = stats.get("events", {})
    revised, unrevised = events.get("revised", 0), events.get("kept_small_change", 0)
    return {
        "afresh": stats.get("items", 0) - revised - unrevised,
        "revised": revised,
        "kept": stats.get("carried_items", 0),
        "kept_despite_small_change": unrevised,
    }


class BatchStep(Step):
    """A step over whole tables, run in the driver alone (it may keep state for its run: it is never shipped)."""

    def prepare(self, ctx: StepContext) -> None:
        """Driver work that needs none of the step's input tables: run beside the step before (as ItemPlan's)."""

    @abstractmethod
    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        """The step's output tables from its input tables."""


@dataclass
class SpilledRows:
    """A yield left on disk: the run's partition files holding its rows (paths relative to `store`), in partition
    order. The rows stay there until the run is published."""

    store: Store
    paths: list[str]

    def read(self, path: str, columns: list[str] | None = None) -> pl.DataFrame:
        folder, _, file = path.rpartition("/")
        df = read_table(self.store.child(folder), file.removesuffix(".parquet"))
        return df.select(columns) if columns else df


class ItemPlan:
    """The driver's side of an item step for one run: how many rounds, each round's items, and the step's tables
    from what the items yielded. The executor makes one per run and step and never ships it, so it may keep state
    between its calls; this default one keeps none and asks the step's own methods."""

    def __init__(self, step: ItemStep):
        self.step = step

    def prepare(self, ctx: StepContext) -> None:
        """Driver work that needs none of the step's input tables (reading the version an update starts from): the
        executor runs it beside the step before this one, while that step waits on its calls."""

    def rounds(self, ctx: StepContext, tables: Tables) -> int:
        return self.step.rounds(ctx, tables)

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> Items:
        return self.step.items(ctx, tables, round_index, earlier)

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        return self.step.finish(ctx, tables, yielded)


class ItemStep(Step):
    yields: dict[str, dict] = {}  # tables each item yields rows of (besides failures), with their schemas
    partition_size: int | None = None  # None: settings.workers.partition_size
    spilled: tuple[str, ...] = ()  # yields given to finish as SpilledRows, not gathered in memory
    Plan: type[ItemPlan] = ItemPlan  # the driver's side (above): a step that keeps run state gives its own

    def plan(self) -> ItemPlan:
        """A fresh driver-side plan for one run of this step."""
        return self.Plan(self)

    def rounds(self, ctx: StepContext, tables: Tables) -> int:
        return 1

    def failure_source(self, item: dict) -> str:
        """What a failures row names as the item's source (a document, a community): where a user looks."""
        return str(item.get("document_id") or item.get("source") or "")

    def failure_row(self, item: dict, exc: BaseException | str, note: str = "") -> dict:
        """The failures row of an item whose model call could not be had (the worker writes it for an
        LLMUnavailableError that leaves `process`; a step with a fallback writes it beside its fallback rows)."""
        return {
            "step": self.name,
            "item_id": item["item_id"],
            "source": self.failure_source(item),
            "reason": f"{exc}{'; ' + note if note else ''}",
        }

    def carry_identity(self, item: dict) -> Any:
        """What an update compares with the previous version to carry this item's rows: by default the whole item
        (all that `process` reads). A step narrows it where part of the item only shapes, not decides, its result."""
        return item

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> Items:
        """The work items of one round (for the default plan; a step with a plan of its own need not define it)."""
        raise TypeError(f"step {self.name} defines neither items nor a plan that does")

    async def process(self, ctx: StepContext, item: dict, models: Any) -> Rows:
        """Rows for one item. A step that batches its own calls defines process_batch instead."""
        raise TypeError(f"step {self.name} defines neither process nor process_batch")

    # optional: async (ctx, items, models) -> Rows, or a list of one Rows per item (a carrying step's must be)
    process_batch = None

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        """The step's output tables from the rows every item yielded (for the default plan, as `items`)."""
        raise TypeError(f"step {self.name} defines neither finish nor a plan that does")
