"""A rich progress display for long jobs (index steps, eval answers), or none; and a line under it with what the
rate limiter knows: per model, the limits in force (learned from the provider or configured), the 429s received
and the calls waiting for room - so a throttled job says why it is slow, and its ETA (from the observed pace)
already counts the throttling."""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

LIMITS_REFRESH_S = 2.0


PLAIN_EVERY_S = 30.0


class PlainProgress:
    """Progress for a log, not a terminal (a `ray job submit` log, CI, a file): a line when a step starts and ends,
    and every PLAIN_EVERY_S seconds a line for each step still running - items done, its calls, tokens and cost."""

    @dataclass
    class Task:
        description: str
        total: float
        completed: float = 0
        fields: dict = field(default_factory=dict)
        started: float = field(default_factory=time.monotonic)
        finished: bool = False

    def __init__(self, stream=None, every: float = PLAIN_EVERY_S):
        self.stream, self.every, self.note = stream or sys.stderr, every, ""
        self.tasks: dict[int, PlainProgress.Task] = {}
        self._lock, self._stop = threading.Lock(), threading.Event()

    def add_task(self, description: str, total: float = 0, **fields) -> int:
        with self._lock:
            task = len(self.tasks)
            self.tasks[task] = self.Task(description, total or 0, fields=dict(fields))
        self._line(f"{description}: started")
        return task

    def update(
        self, task: int, advance: float = 0, completed: float | None = None, total: float | None = None, **fields
    ) -> None:
        with self._lock:
            t = self.tasks[task]
            t.completed = completed if completed is not None else t.completed + advance
            t.total = total if total is not None else t.total
            t.fields.update(fields)
            # a step with nothing to do (no PDF to parse, every item carried) is done once it says so
            done = (t.completed >= t.total if t.total else completed is not None) and not t.finished
            t.finished = t.finished or done
        if done:
            self._line(self._describe(t, "done"))

    def _describe(self, t: PlainProgress.Task, state: str) -> str:
        f = t.fields
        figures = (
            f", calls {f.get('calls', 0):,}, tokens {f.get('tokens', 0):,}, ${f.get('cost', 0.0):.4f}"
            if f.get("calls")
            else ""
        )
        return (
            f"{t.description}: {state} {t.completed:,.0f}/{t.total:,.0f}{figures}, "
            f"{time.monotonic() - t.started:,.0f} s"
        )

    def _line(self, text: str) -> None:
        self.stream.write(f"[{time.strftime('%H:%M:%S')}] {text}\n")
        self.stream.flush()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.every):
            with self._lock:
                running = [t for t in self.tasks.values() if not t.finished]
            slowest = _slowest_in_flight()
            for t in running:
                self._line(
                    self._describe(t, "running")
                    + (f"; slowest request in flight {slowest:,.0f} s" if slowest is not None else "")
                    + (f"; {self.note}" if self.note else "")
                )

    def __enter__(self) -> PlainProgress:
        self._thread = threading.Thread(target=self._heartbeat, name="graphrag-ray-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


def _slowest_in_flight() -> float | None:
    """The oldest chat request this process waits on (in-process workers; Ray's actors keep theirs)."""
    from graphrag_ray.llm.in_flight import slowest_in_flight

    return slowest_in_flight()


def progress_bar(enabled: bool | str, console=None):
    """A rich display (True / "rich"), plain lines for a log ("plain"), or none."""
    if enabled == "plain":
        return PlainProgress()
    if not enabled:
        return nullcontext(None)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.text import Text

    class JobProgress(Progress):
        """The bars, and a note line under them (the limiter's state)."""

        note = ""

        def get_renderables(self):
            yield from super().get_renderables()
            if self.note:
                yield Text(self.note, style="dim", overflow="fold")

    return JobProgress(
        TextColumn("[bold]{task.description:<24}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("calls {task.fields[calls]:,}  tokens {task.fields[tokens]:,}  ${task.fields[cost]:.4f}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        transient=False,
        refresh_per_second=2,
        console=console,
    )  # jobs run for minutes: 2 Hz


def describe_limits(stats: dict) -> str:
    """One line from the limiter's stats: 'gpt-4o-mini: 14,250 TPM / 143 RPM (learned), 3 x 429 (2.1%), 5 waiting'."""
    parts = []
    for model, s in sorted(stats.items()):
        rates = [f"{s[k]:,.0f} {k.upper()}" for k in ("tpm", "rpm") if s.get(k)]
        learned = " (learned)" if s.get("learned_tpm") or s.get("learned_rpm") else ""
        share = s["refusals"] / max(1, s["granted"])
        line = f"{model}: {' / '.join(rates) or 'no limit'}{learned}, {s['refusals']} x 429 ({share:.1%})"
        if s.get("waiting"):
            line += f", {s['waiting']} waiting"
        if s.get("paused_s"):
            line += f", paused {s['paused_s']:.0f} s"
        parts.append(line)
    return "; ".join(parts)


@contextmanager
def watching_limits(progress, limiter):
    """While the block runs, the progress display's note line shows `describe_limits` of the limiter, refreshed
    every 2 s."""
    if progress is None or not hasattr(limiter, "snapshot"):
        yield
        return
    stop = threading.Event()

    def refresh() -> None:
        while not stop.wait(LIMITS_REFRESH_S):
            try:
                text = describe_limits(limiter.snapshot())
            except Exception:  # the limiter's actor is gone (job ending): nothing to show
                continue
            if text:
                progress.note = f"rate limits - {text}"

    thread = threading.Thread(target=refresh, name="graphrag-ray-limits", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=LIMITS_REFRESH_S + 1)
