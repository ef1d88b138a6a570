"""Benchmark helpers: engine CPU seconds and peak RSS of the engine - every process this one started, Ray's
included, except the simulator (and this harness's own sampling thread, or its whole process when the engine
runs as a command) - read per process from /proc, so other work on the machine is never counted as ours."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

CLOCK = os.sysconf("SC_CLK_TCK")
PROVISIONAL = {"?", "ray::IDLE", "default_worker.py"}
PAGE = os.sysconf("SC_PAGE_SIZE")


def process_cpu_seconds(pid: int, children: bool = True) -> float:
    """user + system CPU of `pid`; with `children`, plus that of the children it has reaped."""
    try:
        parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        own = int(parts[11]) + int(parts[12])
        return (own + (int(parts[13]) + int(parts[14]) if children else 0)) / CLOCK
    except (OSError, IndexError):
        return 0.0


def _process_name(pid: int) -> str:
    """A short label: the Ray role for Ray processes (ray::StepWorker, raylet, gcs_server...), else the command."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"
    first = argv[0].decode(errors="replace") if argv and argv[0] else comm
    if first.startswith("ray::"):
        return first.split()[0].split(".")[0]  # the actor class, not the method it runs now
    joined = b" ".join(argv).decode(errors="replace")
    for marker in (
        "dashboard/agent.py",
        "dashboard/dashboard.py",
        "log_monitor",
        "monitor.py",
        "runtime_env",
        "default_worker.py",
        "simulate-llm",
        "graphrag_ray.simulate",
    ):
        if marker in joined:
            return marker
    return comm


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def engine_rss_bytes(exclude: set[int], count_self: bool = True) -> int:
    """RSS of this process (unless not `count_self`) and every process it started, and theirs, minus `exclude`."""
    tree, total, stack = _children(), 0, [os.getpid()]
    while stack:
        pid = stack.pop()
        if pid in exclude:
            continue
        stack.extend(tree.get(pid, []))
        if pid == os.getpid() and not count_self:
            continue
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError):
            pass
    return total


def process_pss_bytes(pid: int) -> int:
    """Proportional set size: the process's private pages plus its share of pages it shares (Ray's processes
    share the interpreter and libraries), so the tree's sum is what the machine gives the engine."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


class Meter:
    """with Meter(exclude_pids={sim.pid()}) as m: ... ; m.cpu_s, m.peak_rss_gb, m.wall_s

    The engine is the tree of processes this one started (Ray's head processes and workers included: a local
    cluster's processes are this process's descendants), less `exclude_pids` and theirs; its CPU is each such
    process's own CPU over the run, read every `interval` (a process that exits keeps its last reading). Other
    processes on the machine - another user's jobs on a shared one - are never counted."""

    def __init__(self, exclude_pids: set[int] | None = None, interval: float = 0.5, engine_here: bool = True):
        """engine_here: the engine runs in this process (else only in the processes it starts, and this one -
        the harness with its sampling thread - is left out of the CPU figures)."""
        self.exclude = set(exclude_pids or ())
        self.engine_here = engine_here
        self.interval = interval
        self.peak_rss = 0
        self.peak_pss = 0
        self.sampler_cpu_s = 0.0
        self._names: dict[int, str] = {}
        self._stop = threading.Event()

    def _tree(self) -> set[int]:
        """This process (when the engine runs here) and every process it started, and theirs, but the excluded."""
        tree, found, stack = _children(), set(), [os.getpid()]
        while stack:
            pid = stack.pop()
            if pid in self.exclude:
                continue
            stack.extend(tree.get(pid, []))
            if pid != os.getpid() or self.engine_here:
                found.add(pid)
        return found

    def _read_tree(self) -> None:
        for pid in self._tree():
            if self._names.get(pid, "?") in PROVISIONAL:  # a Ray worker is labelled by its actor once it has one
                self._names[pid] = _process_name(pid)
            cpu = process_cpu_seconds(pid, children=False)  # a reaped child is counted as itself, once
            if cpu > 0 or pid not in self._procs_last:
                self._procs_last[pid] = (self._names[pid], cpu)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_rss = max(self.peak_rss, engine_rss_bytes(self.exclude, count_self=self.engine_here))
            self.peak_pss = max(self.peak_pss, sum(process_pss_bytes(pid) for pid in self._tree()))
            self._read_tree()
            self.sampler_cpu_s = time.thread_time()  # this thread's own CPU: the harness's, not the engine's
            self._stop.wait(self.interval)

    def __enter__(self) -> Meter:
        self._procs_last: dict[int, tuple[str, float]] = {}
        self._read_tree()
        self._procs0 = dict(self._procs_last)
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.wall_s = time.perf_counter() - self._t0
        self._stop.set()
        self._thread.join()
        self._read_tree()
        self.cpu_s = 0.0
        self.cpu_by_name: dict[str, float] = {}
        for pid, (name, cpu) in self._procs_last.items():
            spent = cpu - self._procs0.get(pid, (name, 0.0))[1]
            if pid == os.getpid():  # the sampling thread runs in the engine's process: its CPU is taken out
                spent -= self.sampler_cpu_s
            self.cpu_s += spent
            if spent > 0.05:
                self.cpu_by_name[name] = round(self.cpu_by_name.get(name, 0.0) + spent, 2)
        self.peak_rss_gb = self.peak_rss / 2**30
        self.peak_pss_mib = self.peak_pss / 2**20


def run_measured(
    cmd: list[str],
    *,
    env: dict | None = None,
    exclude_pids: set[int] | None = None,
    timeout: float | None = None,
    log: Path | None = None,
) -> dict:
    """Run a command; its wall time, the engine CPU (its process tree's, less the excluded processes) and peak
    RSS of the process tree. A command past `timeout` is killed (with its process group) and reported as capped."""
    import signal
    import subprocess

    out = open(log, "wb") if log else subprocess.DEVNULL
    try:
        with Meter(exclude_pids=exclude_pids, engine_here=False) as meter:
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code, capped = proc.wait(timeout=timeout), False
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code, capped = proc.wait(), True
    finally:
        if log:
            out.close()
    return {
        "wall_s": meter.wall_s,
        "cpu_s": meter.cpu_s,
        "peak_rss_gb": meter.peak_rss_gb,
        "peak_pss_mib": meter.peak_pss_mib,
        "returncode": code,
        "capped": capped,
    }
