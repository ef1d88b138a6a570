"""The driver's loop over a pool: hand out tasks to the least-loaded worker, keep `per_worker` in flight on each
(one running, one queued, so no worker idles between tasks), hand results back in completion order, and on any
error cancel everything still in flight before raising it."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from graphrag_ray.exec.pools import Pool

Task = TypeVar("Task")


def dispatch(
    pool: Pool,
    tasks: Iterable[Task],
    method: str,
    args: Callable[[Task], tuple],
    on_result: Callable[[Task, Any], None],
    per_worker: int = 2,
    started: Callable[[], None] | None = None,
) -> None:
    """Run `method(*args(task))` for every task on the pool's workers; `on_result(task, value)` as each ends;
    `started()` once the first tasks are in flight."""
    queue = deque(tasks)
    load = [0] * len(pool)
    in_flight: dict[Any, tuple[Task, int]] = {}
    try:
        while queue or in_flight:
            while queue and min(load) < per_worker:
                worker = load.index(min(load))
                task = queue.popleft()
                in_flight[pool.submit(worker, method, *args(task))] = (task, worker)
                load[worker] += 1
            if started is not None:
                started, call = None, started
                call()
            for handle in pool.wait_any(list(in_flight)):
                task, worker = in_flight.pop(handle)
                load[worker] -= 1
                on_result(task, pool.result(handle))
    except BaseException:
        pool.cancel(list(in_flight))
        raise
