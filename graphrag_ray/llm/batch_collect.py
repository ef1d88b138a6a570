"""Calls that wait for a Batch API job instead of being sent (`index --batch`): the cache layer's other side.

While a `BatchCollector` is active in an async context (a partition of an item step run in batch mode,
exec/batched.py), a chat call the cache cannot answer is not sent: its request is written down and the call raises
`Deferred`, which ends the item's work for this pass - not a failure. The partition's written-down requests go to
the provider as a batch; each answer goes through the same parser, ledger (at the batch price) and cache as a
synchronous one (`ChatModel.accept_batch_answer`); then the deferred items run again and find their answers in the
cache - and defer again on their next call, if they make one (a gleaning round after the extraction). A request
the collector is told to send synchronously (its batches kept failing) is sent as usual."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


class Deferred(BaseException):
    """The call's answer comes from a Batch API job: the item waits for it. A BaseException, so no step's error
    handling (which catches Exception) mistakes it for a failed call."""


@dataclass
class PendingRequest:
    model: Any  # the ChatModel that asked (it takes the answer: parse, ledger, cache)
    key: str  # the cache key: the batch line's custom_id
    stage: str
    messages: list[dict]
    body: dict

    def line(self, endpoint: str) -> bytes:
        return (
            json.dumps({"custom_id": self.key, "method": "POST", "url": endpoint, "body": self.body}, sort_keys=True)
            + "\n"
        ).encode()


@dataclass
class BatchCollector:
    synchronous: set[str] = field(default_factory=set)  # keys sent as usual (their batches kept failing)
    pending: dict[str, PendingRequest] = field(default_factory=dict)

    def defer(self, model, key: str, stage: str, messages: list[dict], body: dict) -> None:
        """Write the request down and end the caller's work for this pass - unless it is to be sent now."""
        if key in self.synchronous:
            return
        self.pending.setdefault(key, PendingRequest(model, key, stage, messages, body))
        raise Deferred(key)


_COLLECTOR: ContextVar[BatchCollector | None] = ContextVar("graphrag_ray_batch_collector", default=None)


def active_collector() -> BatchCollector | None:
    return _COLLECTOR.get()


@contextmanager
def collecting(collector: BatchCollector) -> Iterator[BatchCollector]:
    token = _COLLECTOR.set(collector)
    try:
        yield collector
    finally:
        _COLLECTOR.reset(token)


def requests_digest(keys: list[str], attempt: int) -> str:
    """Which requests a batch holds (and which attempt at them): its name in the run state and the provider's
    metadata."""
    return hashlib.sha256(("\n".join(sorted(keys)) + f"#{attempt}").encode()).hexdigest()[:32]
