"""Where item-step partitions run: a pool of async Ray actors (a cluster, or a Ray started for the run), or
the same StepWorkers on an event loop in this process (small jobs: no Ray start-up, no actor start-up).

Both pools take a partition and hand back a future-like handle; the executor's dispatch loop, markers and
progress are the same for both (datatrove's local and Ray executors, in one loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from typing import Any

from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.index.step import StepContext
from graphrag_ray.index.worker import StepWorker
from graphrag_ray.llm.client import close_loop_clients
from graphrag_ray.ray_runtime import ray_running


def choose_executor(setting: str, input_bytes: int, local_max_input_mb: float) -> str:
    """`auto`: Ray when there is a cluster to join (a submitted job, RAY_ADDRESS, Ray already running here) or the
    input is big enough to pay for Ray's start-up (seconds) with parallel actors; in this process otherwise."""
    if setting != "auto":
        return setting
    if ray_running() or os.environ.get("RAY_ADDRESS"):
        return "ray"
    return "ray" if input_bytes > local_max_input_mb * 2**20 else "local"


class RayActorPool:
    def __init__(self, ctx: StepContext, limiter: Any):
        import ray  # here, not at the top: an in-process job never imports Ray (~0.3 s)

        self.ray = ray
        cfg = ctx.settings.workers
        actor_cls = ray.remote(StepWorker).options(num_cpus=cfg.actor_cpus, max_restarts=-1, max_task_retries=-1,
                                                   scheduling_strategy="SPREAD")
        self.actors = [actor_cls.remote(ctx, limiter) for _ in range(cfg.num_actors)]

    def __len__(self) -> int:
        return len(self.actors)

    def submit(self, worker: int, step_name: str, part: list[dict]):
        return self.actors[worker].run_partition.remote(step_name, part)

    def wait_any(self, handles: list) -> list:
        ready, _ = self.ray.wait(handles, num_returns=1)
        return ready

    def result(self, handle) -> dict:
        try:
            return self.ray.get(handle)
        except self.ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, GraphRagRayError):
                raise cause from None
            raise

    def cancel(self, handles: list) -> None:
        for handle in handles:
            self.ray.cancel(handle)

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)


class LocalPool:
    """StepWorkers on one event loop in a background thread of this process; the dispatch loop waits on
    their futures as it waits on Ray's."""

    def __init__(self, ctx: StepContext, limiter: Any):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="graphrag-ray-local-pool", daemon=True)
        self.thread.start()
        self.workers = [StepWorker(ctx, limiter, in_process=True) for _ in range(ctx.settings.workers.num_actors)]

    def __len__(self) -> int:
        return len(self.workers)

    def submit(self, worker: int, step_name: str, part: list[dict]) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(self.workers[worker].run_partition(step_name, part), self.loop)

    def wait_any(self, handles: list) -> list:
        done, _ = concurrent.futures.wait(handles, return_when=concurrent.futures.FIRST_COMPLETED)
        return list(done)

    def result(self, handle: concurrent.futures.Future) -> dict:
        return handle.result()

    def cancel(self, handles: list) -> None:
        for handle in handles:
            handle.cancel()

    def close(self) -> None:
        if self.thread.is_alive():
            asyncio.run_coroutine_threadsafe(close_loop_clients(), self.loop).result(timeout=30)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=30)
        self.loop.close()
