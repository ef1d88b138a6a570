"""Where work runs: a pool of workers - async Ray actors, or the same worker objects in this process.

A worker is any object with async methods (a step runner, an eval answerer, a global-search mapper), described by
a `WorkerSpec`. Both pools offer the same two ways in:
  * `submit(i, method, *args)` -> a handle, with `wait_any`, `result` and `cancel` - for a driver's dispatch loop
    (dispatch.py), which is the same for both pools (datatrove's local and Ray executors, in one loop);
  * `await call(method, *args)` - from an event loop, spread over the workers (global search's map calls).
A Ray task's error arrives unwrapped (our own errors as themselves, not as RayTaskError); `close()` cancels what
is still running and ends the actors. Use a pool as a context manager, or `shared_pool` for one that lives as long
as the process (warm workers reused by many queries).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import hashlib
import itertools
import os
import pickle
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.exec.runtime import choose_backend, ensure_ray


@dataclass(frozen=True)
class WorkerSpec:
    """How to make a worker: `cls(*args)`; on Ray, with these actor options."""

    cls: type
    args: tuple = ()
    num_cpus: float = 0
    max_concurrency: int | None = None  # async actors: calls running at once (Ray's default is 1000)
    restartable: bool = True  # a lost worker process or node is replaced and its calls re-run
    options: dict = field(default_factory=dict)


class Pool(ABC):
    size: int

    def __len__(self) -> int:
        return self.size

    @abstractmethod
    def submit(self, worker: int, method: str, *args) -> Any:
        """Start `method(*args)` on worker `worker`; returns a handle."""

    @abstractmethod
    def wait_any(self, handles: list) -> list:
        """Block until at least one handle is done; return the done ones."""

    @abstractmethod
    def result(self, handle) -> Any:
        """The handle's value, or its error (unwrapped)."""

    @abstractmethod
    def cancel(self, handles: list) -> None:
        """Stop work that is still running (best effort)."""

    @abstractmethod
    async def call(self, method: str, *args) -> Any:
        """`method(*args)` on the next worker, awaited on the caller's event loop."""

    @abstractmethod
    def close(self) -> None:
        """Cancel what runs, end the workers."""

    def settle(self, most: float) -> None:  # noqa: B027 - a no-op unless the pool shares this process
        """Return once the work handed to the workers has started and waits (on the network, say), or after `most`
        seconds. Workers in other processes (Ray's) need nothing from this one: at once."""

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class InProcessPool(Pool):
    """Worker objects in this process. `submit` runs them on one event loop in a background thread (started on
    first use), so a synchronous driver waits on their futures as it would on Ray's; `call` runs them on the
    caller's own loop."""

    def __init__(self, spec: WorkerSpec, size: int):
        self.size = size
        self.workers = [spec.cls(*spec.args) for _ in range(size)]
        self._next = itertools.cycle(range(size))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._submitted: set[concurrent.futures.Future] = set()  # not yet done: cancelled by close()
        self._closed = False

    def _background_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="graphrag-ray-pool", daemon=True)
            self._thread.start()
        return self._loop

    def submit(self, worker: int, method: str, *args) -> concurrent.futures.Future:
        if self._closed:  # a background step handing out work after the run stopped: it stops too
            raise concurrent.futures.CancelledError()
        coro = getattr(self.workers[worker], method)(*args)
        future = asyncio.run_coroutine_threadsafe(coro, self._background_loop())
        self._submitted.add(future)
        future.add_done_callback(self._submitted.discard)
        return future

    def wait_any(self, handles: list) -> list:
        done, _ = concurrent.futures.wait(handles, return_when=concurrent.futures.FIRST_COMPLETED)
        return list(done)

    def result(self, handle: concurrent.futures.Future) -> Any:
        return handle.result()

    def cancel(self, handles: list) -> None:
        for handle in handles:
            handle.cancel()

    async def call(self, method: str, *args) -> Any:
        return await getattr(self.workers[next(self._next)], method)(*args)

    def settle(self, most: float) -> None:
        """The workers share this process's GIL: work started beside them now (Leiden, reading a table, an
        import) would hold back the requests they are about to send, each send waiting for the GIL. Return once a
        turn of their event loop finds nothing else to run (they all wait on the network), or after `most`."""
        if self._loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(_quiet(), self._loop).result(timeout=most)
        except concurrent.futures.TimeoutError:
            pass

    def close(self) -> None:
        self._closed = True
        if self._loop is None:
            return
        loop, thread, self._loop = self._loop, self._thread, None
        # whoever still waits on this pool's futures (a background step's dispatch, in another thread) is woken:
        # once the loop stops, a future it was running would never complete
        for future in list(self._submitted):
            future.cancel()
        if thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(_shutdown(self.workers), loop).result(timeout=30)
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                pass  # a worker that will not close in 30 s is left to the process's exit
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
        loop.close()


async def _shutdown(workers: list) -> None:
    """What asyncio.run does before it closes its loop, for the pool's: every task still on it (a cancelled
    request unwinding its stream, a watchdog, a settle probe) is cancelled and awaited - a task destroyed pending,
    or a coroutine finalised after the loop closed, prints a traceback - then each worker closes the SDK clients
    it opened on this loop, and open async generators are finalised."""
    me = asyncio.current_task()
    for _ in range(3):  # a task's unwinding can start another (a client's close): a few rounds
        tasks = [task for task in asyncio.all_tasks() if task is not me and not task.done()]
        if not tasks:
            break
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=10)
    for worker in workers:
        if hasattr(worker, "aclose"):
            await worker.aclose()
    await asyncio.get_running_loop().shutdown_asyncgens()


async def _quiet(turns: int = 2) -> None:
    """Return after `turns` consecutive turns of the running loop that had nothing else to run (a turn that runs
    other callbacks - requests being built and sent, answers read - takes longer than a millisecond)."""
    loop = asyncio.get_running_loop()
    quiet = 0
    while quiet < turns:
        began = loop.time()
        await asyncio.sleep(0)
        quiet = quiet + 1 if loop.time() - began < 0.001 else 0
        if not quiet:
            await asyncio.sleep(0.005)  # let the busy turns pass without spinning on them


class RayPool(Pool):
    """Async Ray actors, spread over the cluster's nodes."""

    def __init__(self, spec: WorkerSpec, size: int, name: str | None = None):
        ensure_ray()
        import ray  # here, not at the top: an in-process job never imports Ray

        self.ray = ray
        self.size = size
        options: dict[str, Any] = {"num_cpus": spec.num_cpus, "scheduling_strategy": "SPREAD", **spec.options}
        if spec.max_concurrency is not None:
            options["max_concurrency"] = spec.max_concurrency
        if spec.restartable:
            options.update(max_restarts=-1, max_task_retries=-1)
        actor_cls = ray.remote(spec.cls)
        self.actors = []
        for i in range(size):
            named = {"name": f"{name}-{i}", "namespace": "graphrag_ray", "get_if_exists": True} if name else {}
            self.actors.append(actor_cls.options(**options, **named).remote(*spec.args))
        self._next = itertools.cycle(range(size))
        self._running: set = set()

    def submit(self, worker: int, method: str, *args):
        ref = getattr(self.actors[worker], method).remote(*args)
        self._running.add(ref)
        return ref

    def wait_any(self, handles: list) -> list:
        ready, _ = self.ray.wait(handles, num_returns=1)
        return ready

    def result(self, handle) -> Any:
        self._running.discard(handle)
        try:
            return self.ray.get(handle)
        except self.ray.exceptions.RayTaskError as exc:
            raise _unwrapped(exc) from None

    def cancel(self, handles: list) -> None:
        for handle in handles:
            self._running.discard(handle)
            self.ray.cancel(handle)

    async def call(self, method: str, *args) -> Any:
        try:
            return await getattr(self.actors[next(self._next)], method).remote(*args)
        except self.ray.exceptions.RayTaskError as exc:
            raise _unwrapped(exc) from None

    def close(self) -> None:
        actors, self.actors = self.actors, []
        if not self.ray.is_initialized():  # Ray was shut down (at exit, say): its actors are gone with it, and
            return  # a call now would start a new Ray
        try:
            self.cancel(list(self._running))
        finally:
            for actor in actors:
                self.ray.kill(actor)


def _unwrapped(exc: Exception) -> Exception:
    """Our own errors (a bad key, an unreachable endpoint) travel as themselves; anything else stays Ray's."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, GraphRagRayError) else exc


def open_pool(backend: str, spec: WorkerSpec, size: int) -> Pool:
    """A pool for one job: close it (or use it as a context manager) when the job ends."""
    return RayPool(spec, size) if backend == "ray" else InProcessPool(spec, size)


_SHARED: dict[tuple[str, str], Pool] = {}
_SHARED_LOCK = threading.Lock()


def shared_pool(backend: str, name: str, spec: WorkerSpec, size: int = 1) -> Pool:
    """A pool kept for the process's life under `name` (on Ray: named actors, found again by later drivers of
    the same job), closed at exit: many short calls (a bulk eval's thousands of queries) reuse warm workers."""
    key = (backend, name)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = RayPool(spec, size, name=name) if backend == "ray" else InProcessPool(spec, size)
        return _SHARED[key]


@atexit.register
def _close_shared() -> None:
    for pool in list(_SHARED.values()):
        try:
            pool.close()
        except Exception:  # at exit Ray may already be down: nothing is left to end
            pass
    _SHARED.clear()


def calls_pool(purpose: str, executor: str, worker: type, models: Any, settings: Any, root: Any) -> Pool:
    """A pool of `worker(models)` for model calls a command makes outside an index run (global search's map and
    rating calls), by what it is for: a worker in this process; or - with a cluster to join, or `executor: ray`
    - a warm Ray actor kept for the process's life, named for the purpose, the settings and the root (later
    queries with the same settings, an eval's thousands, reuse it), whose models reserve from the job's limiter."""
    if choose_backend(executor) != "ray":
        return InProcessPool(WorkerSpec(worker, (models,)), 1)
    name = f"{purpose}-" + hashlib.sha256(pickle.dumps((settings, str(root)))).hexdigest()[:12]
    with _SHARED_LOCK:
        if ("ray", name) in _SHARED:
            return _SHARED[("ray", name)]
    from graphrag_ray.llm.models import Models
    from graphrag_ray.llm.ratelimit import RayRateLimiter

    limiter = (
        models.limiter if isinstance(models.limiter, RayRateLimiter) else RayRateLimiter.for_job(f"query-{os.getpid()}")
    )
    # an absolute root: a Ray worker's current directory is not the driver's
    on_ray = Models.create(settings, str(Path(root).resolve()) if root else None, limiter=limiter, check_first=True)
    return shared_pool("ray", name, WorkerSpec(worker, (on_ray,), max_concurrency=1000, restartable=False))
