"""A rich progress display for long jobs (index steps, eval answers), or none; and a line under it with what the
rate limiter knows: per model, the limits in force (learned from the provider or configured), the 429s received
and the calls waiting for room - so a throttled job says why it is slow, and its ETA (from the observed pace)
already counts the throttling."""

from __future__ import annotations

import threading
from contextlib import contextmanager, nullcontext

LIMITS_REFRESH_S = 2.0


def progress_bar(enabled: bool, console=None):
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

    return JobProgress(TextColumn("[bold]{task.description:<24}"), BarColumn(),
                       TextColumn("{task.completed}/{task.total}"),
                       TextColumn("calls {task.fields[calls]:,}  tokens {task.fields[tokens]:,}  "
                                  "${task.fields[cost]:.4f}"), TimeElapsedColumn(), TimeRemainingColumn(),
                       transient=False, refresh_per_second=2, console=console)  # jobs run for minutes: 2 Hz


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
