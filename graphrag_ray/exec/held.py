"""What the driver holds between steps: a large run keeps in memory only the tables the next step reads, in the
columns it reads (every table is in the run's folder: a later step reads the rest back), and gives the C heap's
freed pages back between steps. The executor (executor.py) keeps the order, the lanes and the gates, and asks this
module for tables; steps know nothing of it."""

from __future__ import annotations

import ctypes

import polars as pl

from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.exec.run_state import RunState, RunTables
from graphrag_ray.exec.step import Step, Tables
from graphrag_ray.storage.schemas import SCHEMAS

Wanted = dict[str, tuple[str, ...] | None]  # table -> the columns read (None: all of it)
FAILURE_SCHEMA = SCHEMAS["failures"]


def wanted_by(steps: list[Step]) -> Wanted:
    """The tables `steps` read and hold (not their scans), each with the columns they read (None: all)."""
    wanted: Wanted = {}
    for step in steps:
        for name in (*step.reads, *step.optional_reads):
            if name in step.lazy_reads:
                continue
            columns = step.read_columns.get(name)
            if name in wanted:  # the union of what they read
                before = wanted[name]
                columns = None if before is None or columns is None else (*before, *columns)
            wanted[name] = None if columns is None else tuple(dict.fromkeys(columns))
    return wanted


class HeldTables:
    """The driver's tables during one run of a method's steps: what each step is given, what is read back after it
    (with `keep`: only what the next step reads, in its columns - a later step reads the rest back), what is let go
    between steps, and the run's tables at its end. It remembers which tables were read narrow: a later step that
    reads all of such a table reads it again, whole."""

    def __init__(self, run: RunState, steps: list[Step], given: Tables | None = None, keep: set[str] | None = None):
        self.run, self.steps, self.keep = run, steps, keep
        self.given = dict(given or {})  # input tables no step writes
        self.tables: Tables = dict(self.given)
        self.narrow: set[str] = set()  # the tables read back with only some of their columns

    # -- between steps ------------------------------------------------------------------------------
    def wanted_after(self, index: int) -> Wanted | None:
        """What to read back of the tables the step at `index` writes (None: all, whole): with `keep`, what the
        next step reads - or, for a background step, whose tables join when a later step reads them, what every
        later step reads."""
        if self.keep is None:
            return None
        step = self.steps[index]
        return wanted_by(self.steps[index + 1 :] if step.background else self.steps[index + 1 : index + 2])

    def snapshot(self) -> Tables:
        """The tables as they are now: what a background step starts from (the driver's go on changing)."""
        return dict(self.tables)

    def add(self, tables: Tables) -> None:
        self.tables.update(tables)

    def after(self, index: int) -> None:
        """With `keep`, every step's tables being in the run's folder, memory holds only what the step after
        `index` reads (a later one reads the rest back)."""
        if self.keep is None:
            return
        following = self.steps[index + 1] if index + 1 < len(self.steps) else None
        needed = wanted_by([following]) if following else {}
        for name in [n for n in self.tables if n not in self.given]:
            if name not in needed or not self.keeps(name, self.tables[name], needed[name]):
                del self.tables[name]

    def final(self) -> Tables | RunTables:
        """Every table the steps wrote, and all their `failures` rows together; with `keep`, the `keep` tables as
        RunTables, read back from the run one at a time."""
        failures = [df for df in (self.run.load_table(f"failures__{s.name}") for s in self.steps) if df is not None]
        self.tables["failures"] = (
            pl.concat(failures, how="diagonal_relaxed") if failures else pl.DataFrame(schema=FAILURE_SCHEMA)
        )
        if self.keep is None:
            return self.tables
        written = {w for step in self.steps for w in step.writes}
        return RunTables(self.run, self.keep & written, {"failures": self.tables["failures"]})

    # -- a step's tables -----------------------------------------------------------------------------
    def inputs(self, step: Step, tables: Tables | None = None) -> Tables:
        """The tables `step` reads (its optional reads when written), from `tables` (a background step's
        snapshot) or the held ones, else read back from the run; an error naming any that is missing."""
        tables = self.tables if tables is None else tables
        inputs = {r: self._input(step, r, tables) for r in step.reads}
        for r in step.optional_reads:
            found = self._input(step, r, tables)
            if found is not None:
                inputs[r] = found
        missing = [r for r, df in inputs.items() if df is None]
        if missing:
            raise GraphRagRayError(f"step {step.name}: input tables missing from the run: {', '.join(missing)}")
        return inputs

    def _input(self, step: Step, name: str, tables: Tables) -> pl.DataFrame | pl.LazyFrame | None:
        """A table the step reads: held, or read back from the run (only its `read_columns`, when it names them);
        a `lazy_reads` table as a scan of the run's file."""
        if name in step.lazy_reads:
            return self.run.scan_table(name)
        columns = step.read_columns.get(name)
        if name in tables and self.holds(name, tables[name], columns):
            return tables[name].select(columns) if columns is not None else tables[name]
        return self.run.load_table(name, list(columns) if columns is not None else None)

    def read_back(self, step: Step, wanted: Wanted | None) -> Tables:
        """The tables `step` wrote, from the run: the `wanted` ones in their wanted columns (None: every one,
        whole)."""
        out = {}
        for name in [w for w in step.writes if wanted is None or w in wanted]:
            columns = None if wanted is None else wanted[name]
            out[name] = self.run.load_table(name, None if columns is None else list(columns))
            (self.narrow.discard if columns is None else self.narrow.add)(name)
        return out

    def keeps(self, name: str, table: pl.DataFrame, columns: tuple[str, ...] | None) -> bool:
        """Whether to hold `table` for a step that reads `columns` of it: it has them and no others (a table wider
        than the step reads is let go and read again narrow: a select of it would keep all of it in memory)."""
        return self.holds(name, table, columns) and (columns is None or set(table.columns) <= set(columns))

    def holds(self, name: str, table: pl.DataFrame, columns: tuple[str, ...] | None) -> bool:
        """Whether a held table has the `columns` a step reads (None: the whole table, not a narrow read)."""
        if columns is None:
            return name not in self.narrow
        return set(columns) <= set(table.columns)


def peak_rss_mb() -> int:
    """This process's peak resident memory so far: the kernel's high-water mark (which a caller may have reset),
    else getrusage's."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def give_back_freed_memory() -> None:
    """Return the C heap's free pages to the system between steps (glibc keeps what Python's objects freed, so a
    step's transient rows stayed resident and the next step's peak stacked on them); a no-op elsewhere."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
