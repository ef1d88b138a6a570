"""Work beside a step: driver work that can run while a step waits on the network - a background step's own
driver work, the next step's `prepare()`, slow imports - starts once the step now running has its first work out.

Started at once, such work would compete with what is on the run's critical path: the step's own driver work
before it dispatches, and - for workers in this process, which share the driver's GIL - the requests those workers
are about to send (Leiden held an update's first summaries back by half a second, lancedb's import its gleaning
calls). So it waits at a gate the running step opens when its first partitions are dispatched (or when it ends);
then, with in-process workers, until their event loop is quiet (their requests are out). Work the run is waiting
for starts at once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from graphrag_ray.exec.pools import Pool

# in-process workers send a partition's requests within tens of milliseconds; a loop still busy after this is
# busy with answers (a fast provider, or the step's own CPU work), and waiting longer would only delay the work
SETTLE_AT_MOST_S = 0.5


class Beside:
    def __init__(self, pool: Callable[[], Pool | None]):
        self._pool = pool  # the executor's pool, once it has one
        self._lock = threading.Lock()
        self._closed: list[tuple[threading.Event, bool]] = []  # (gate, opened only by a step calling models)
        self._urgent: set[threading.Event] = set()  # gates of work the run now waits for

    def gate(self, llm_only: bool = False) -> threading.Event:
        """A gate the next dispatch opens; with `llm_only`, only the dispatch of a step that calls models."""
        gate = threading.Event()
        with self._lock:
            self._closed.append((gate, llm_only))
        return gate

    def open(self, llm: bool) -> None:
        """A step has its first work out (or is done): the work waiting for it may start; with `llm` false, not the
        work waiting for model calls."""
        with self._lock:
            opened = [gate for gate, llm_only in self._closed if llm or not llm_only]
            self._closed = [(gate, llm_only) for gate, llm_only in self._closed if llm_only and not llm]
        for gate in opened:
            gate.set()

    def hurry(self, gate: threading.Event) -> None:
        """The run waits for this work: it starts now, without settling first."""
        with self._lock:
            self._urgent.add(gate)
        gate.set()

    def run_after(self, gate: threading.Event, work: Callable, *args: Any) -> Any:
        """`work(*args)` in this thread once `gate` opens (and in-process workers have their requests out)."""
        gate.wait()
        with self._lock:
            urgent = gate in self._urgent
        pool = self._pool()
        if pool is not None and not urgent:
            pool.settle(most=SETTLE_AT_MOST_S)
        return work(*args)

    def thread(self, gate: threading.Event, work: Callable, *args: Any) -> Future:
        """`run_after` in a thread of its own; its outcome in the future returned."""
        done: Future = Future()

        def run() -> None:
            try:
                done.set_result(self.run_after(gate, work, *args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for it
                done.set_exception(exc)

        threading.Thread(target=run, daemon=True, name="graphrag-ray-beside").start()
        return done
