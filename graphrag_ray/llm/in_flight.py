"""What this process is waiting on: each request on its way to an endpoint (since when, to whom) and when each
endpoint last sent a byte of any answer. The client writes it; the stall watchdog (client.py), a run's progress
line (exec/progress.py) and a question's waiting lines (deadline.py) read it."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

Endpoint = tuple[str, str]  # (api_base, model)


@dataclass
class Waiting:
    where: str  # "model 'X' (id) at URL"
    endpoint: Endpoint
    since: float  # time.monotonic() when it was sent


_PROGRESS: dict[Endpoint, float] = {}  # endpoint -> when it last sent a piece of any answer to this process
_WAITING: dict[int, Waiting] = {}
_TOKENS = itertools.count()


def begin(where: str, endpoint: Endpoint) -> int:
    token = next(_TOKENS)
    _WAITING[token] = Waiting(where, endpoint, time.monotonic())
    return token


def end(token: int) -> None:
    _WAITING.pop(token, None)


def progressed(endpoint: Endpoint) -> None:
    """The endpoint sent a piece of an answer just now."""
    _PROGRESS[endpoint] = time.monotonic()


def last_progress(endpoint: Endpoint) -> float:
    return _PROGRESS.get(endpoint, 0.0)


def slowest_in_flight() -> float | None:
    """Seconds the oldest request of this process has been waiting for its answer (None: none waits)."""
    oldest = min((w.since for w in _WAITING.values()), default=None)
    return None if oldest is None else time.monotonic() - oldest


def oldest_wait(since: float) -> str | None:
    """What a question that began at `since` waits on, as a person reads it: "model 'X' (id) at URL: 30 s, no
    bytes yet" (the oldest request in flight; the seconds since the question began; "last bytes 12 s ago" once its
    endpoint sent anything since then)."""
    if not _WAITING:
        return None
    waiting = min(_WAITING.values(), key=lambda w: w.since)
    now = time.monotonic()
    heard = _PROGRESS.get(waiting.endpoint, 0.0)
    news = f"last bytes {now - heard:.0f} s ago" if heard >= since else "no bytes yet"
    return f"{waiting.where}: {now - since:.0f} s, {news}"


# Reading the prompt (prefill) comes before the first byte: a CPU server reads a few hundred tokens a second, so a
# long prompt is silent for minutes and is not stalled. Seconds per prompt token, learned per endpoint from each
# stream's first byte (the slowest recent reading); until then this assumed rate.
ASSUMED_PREFILL_S_PER_TOKEN = 1 / 200
_PREFILL: dict[Endpoint, float] = {}


def first_byte_after(endpoint: Endpoint, seconds: float, prompt_tokens: int) -> None:
    """A stream's first byte came `seconds` after it was sent, for a prompt of about `prompt_tokens`."""
    if prompt_tokens < 256 or seconds <= 0:  # a short prompt's wait is latency and queueing, not reading
        return
    observed = seconds / prompt_tokens
    known = _PREFILL.get(endpoint)
    _PREFILL[endpoint] = observed if known is None else max(observed, 0.7 * known + 0.3 * observed)


def prefill_patience(endpoint: Endpoint, prompt_tokens: int) -> float:
    """Seconds a stream may stay silent before its first byte beyond stall_timeout: its prompt being read."""
    return prompt_tokens * max(_PREFILL.get(endpoint, 0.0), ASSUMED_PREFILL_S_PER_TOKEN)
