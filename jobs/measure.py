"""Benchmark helpers: engine CPU seconds (machine CPU minus the simulator's and this harness's own: its /proc
sampling thread, or its whole process when the engine runs as a command) and peak RSS of the engine (every
process this one started - Ray's included - except the simulator), read from /proc."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

CLOCK = os.sysconf("SC_CLK_TCK")
PROVISIONAL = {"?", "ray::IDLE", "default_worker.py"}
PAGE = os.sysconf("SC_PAGE_SIZE")


def machine_cpu_seconds() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, idle, iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + nice + system + irq + softirq) / CLOCK


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
    for marker in ("dashboard/agent.py", "dashboard/dashboard.py", "log_monitor", "monitor.py", "runtime_env",
                   "default_worker.py", "simulate-llm", "graphrag_ray.simulate"):
        if marker in joined:
            return marker
    return comm


def cpu_by_process(names: dict[int, str] | None = None) -> dict[int, tuple[str, float]]:
    """Every process's (label, CPU seconds); `names` keeps the labels already read (a pid's label is read once)."""
    names = {} if names is None else names
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            pid = int(entry.name)
            if names.get(pid, "?") in PROVISIONAL:  # a Ray worker is labelled by its actor once it has one
                names[pid] = _process_name(pid)
            out[pid] = (names[pid], process_cpu_seconds(pid, children=False))  # a reaped child once
    return out


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


class Meter:
    """with Meter(exclude_pids={sim.pid()}) as m: ... ; m.cpu_s, m.peak_rss_gb, m.wall_s"""

    def __init__(self, exclude_pids: set[int] | None = None, interval: float = 0.5, engine_here: bool = True):
        """engine_here: the engine runs in this process (else only in the processes it starts, and this one -
        the harness with its sampling thread - is left out of the CPU figures)."""
        self.exclude = set(exclude_pids or ())
        self.engine_here = engine_here
        self.interval = interval
        self.peak_rss = 0
        self.sampler_cpu_s = 0.0
        self._names: dict[int, str] = {}
        self._stop = threading.Event()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_rss = max(self.peak_rss, engine_rss_bytes(self.exclude, count_self=self.engine_here))
            # processes that exit mid-run keep their last reading
            self._procs_last.update(cpu_by_process(self._names))
            self.sampler_cpu_s = time.thread_time()  # this thread's own CPU: the harness's, not the engine's
            self._stop.wait(self.interval)

    def __enter__(self) -> "Meter":
        self._procs0 = cpu_by_process(self._names)
        self._procs_last = dict(self._procs0)
        self._cpu0 = machine_cpu_seconds()
        self._excluded0 = sum(process_cpu_seconds(p) for p in self.exclude)
        self._self0 = process_cpu_seconds(os.getpid(), children=False)
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.wall_s = time.perf_counter() - self._t0
        excluded = sum(process_cpu_seconds(p) for p in self.exclude) - self._excluded0
        harness = 0.0 if self.engine_here else process_cpu_seconds(os.getpid(), children=False) - self._self0
        cpu_s = machine_cpu_seconds() - self._cpu0 - excluded - harness
        self._stop.set()
        self._thread.join()
        if self.engine_here:  # the sampling thread runs in the engine's process: its CPU is taken out
            cpu_s -= self.sampler_cpu_s
        self.cpu_s = cpu_s
        self.cpu_by_name: dict[str, float] = {}
        final = cpu_by_process()  # labels read anew: a Ray worker seen first as ray::IDLE is now its actor
        self._procs_last = {pid: (final[pid][0] if pid in final else name, cpu)
                            for pid, (name, cpu) in self._procs_last.items()}
        self._procs_last.update(final)
        for pid, (name, cpu) in self._procs_last.items():
            if pid in self.exclude:
                continue
            spent = cpu - self._procs0.get(pid, (name, 0.0))[1]
            if pid == os.getpid() and self.engine_here:
                spent -= self.sampler_cpu_s
            if spent > 0.05:
                self.cpu_by_name[name] = round(self.cpu_by_name.get(name, 0.0) + spent, 2)
        self.peak_rss_gb = self.peak_rss / 2**30


def run_measured(cmd: list[str], *, env: dict | None = None, exclude_pids: set[int] | None = None,
                 timeout: float | None = None, log: Path | None = None) -> dict:
    """Run a command; its wall time, the engine CPU (machine CPU minus the excluded processes) and peak RSS of
    the process tree. A command past `timeout` is killed (with its process group) and reported as capped."""
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
    return {"wall_s": meter.wall_s, "cpu_s": meter.cpu_s, "peak_rss_gb": meter.peak_rss_gb, "returncode": code,
            "capped": capped}
