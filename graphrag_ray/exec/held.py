"""What the driver holds between steps: a large run keeps in memory only the tables the next step reads, in the
columns it reads (every table is in the run's folder: a later step reads the rest back), and gives the C heap's
freed pages back between steps. The executor (executor.py) asks this module; steps know nothing of it."""

from __future__ import annotations

import ctypes

import polars as pl

from graphrag_ray.exec.run_state import RunState
from graphrag_ray.exec.step import Step, Tables

Wanted = dict[str, tuple[str, ...] | None]  # table -> the columns read (None: all of it)


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
    """Reads a step's tables back from the run in the columns wanted, and remembers which were read narrow: a later
    step that reads all of such a table reads it again, whole."""

    def __init__(self):
        self.narrow: set[str] = set()  # the tables read back with only some of their columns

    def read_back(self, run: RunState, step: Step, wanted: Wanted | None) -> Tables:
        """The tables `step` wrote, from `run`: the `wanted` ones in their wanted columns (None: every one, whole)."""
        out = {}
        for name in [w for w in step.writes if wanted is None or w in wanted]:
            columns = None if wanted is None else wanted[name]
            out[name] = run.load_table(name, None if columns is None else list(columns))
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
