"""A rich progress display for long jobs (index steps, eval answers), or none."""

from __future__ import annotations

from contextlib import nullcontext


def progress_bar(enabled: bool):
    if not enabled:
        return nullcontext(None)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn("[bold]{task.description:<24}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TextColumn("calls {task.fields[calls]:,}  tokens {task.fields[tokens]:,}  "
                               "${task.fields[cost]:.4f}"), TimeElapsedColumn(), TimeRemainingColumn(),
                    transient=False, refresh_per_second=2)  # a job runs for minutes: 2 Hz is plenty
