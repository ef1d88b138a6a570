"""A question's deadline: every model call made to answer one question (its endpoint check, retries, stalls and
all) ends by one moment, and while it waits a line says so at least every WAIT_REPORT_S seconds.

Interactive commands (query, chat, a served question) have it (`query.deadline_s`); an index run does not - it keeps
its progress-based patience (stall_timeout) for slow local servers. The deadline is a context variable, so every
task a question starts (global search's map calls) shares it."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from graphrag_ray.llm import in_flight

log = logging.getLogger(__name__)
WAIT_REPORT_S = 10.0  # a waiting line at least this often (the promise is "at least every 15 s")


@dataclass(frozen=True)
class Deadline:
    at: float  # time.monotonic() (the event loop's clock) when every call must have ended
    seconds: float
    setting: str = "query.deadline_s"

    def said(self) -> str:
        return f"{self.setting} ({self.seconds:g} s)"


_CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("question_deadline", default=None)


def current() -> Deadline | None:
    return _CURRENT.get()


def say_waiting(line: str) -> None:
    log.warning("waiting for %s", line)


@contextlib.asynccontextmanager
async def question_deadline(
    seconds: float | None, report: Callable[[str], None] | None = say_waiting
) -> AsyncIterator[Deadline | None]:
    """Within it, model calls end by `seconds` from now (None or 0: no deadline), and while any request waits a
    line ("waiting for model 'X' (id) at URL: 30 s, no bytes yet") goes to `report` every WAIT_REPORT_S."""
    if not seconds:
        yield None
        return
    deadline = Deadline(time.monotonic() + seconds, seconds)
    token = _CURRENT.set(deadline)
    reporter = asyncio.ensure_future(_report_waits(report, time.monotonic())) if report is not None else None
    try:
        yield deadline
    finally:
        with contextlib.suppress(ValueError):  # an abandoned generator closed from another task's context
            _CURRENT.reset(token)
        if reporter is not None:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter


async def _report_waits(report: Callable[[str], None], since: float) -> None:
    while True:
        await asyncio.sleep(WAIT_REPORT_S)
        if line := in_flight.oldest_wait(since):
            report(line)


@contextlib.asynccontextmanager
async def within_deadline(where: str) -> AsyncIterator[None]:
    """Around one model call: it ends by the question's deadline (if any), as LLMUnavailableError naming `where`."""
    from graphrag_ray.errors import LLMUnavailableError

    deadline = current()
    if deadline is None:
        yield
        return
    try:
        async with asyncio.timeout_at(deadline.at):
            yield
    except TimeoutError:
        raise LLMUnavailableError(
            f"{where}: no answer within {deadline.said()} - the endpoint accepted the request but did not "
            "finish it (not answering, overloaded, or slower than the deadline)"
        ) from None
