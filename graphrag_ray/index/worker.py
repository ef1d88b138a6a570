"""The Ray actor that runs item steps' partitions. Many run at once, each an async actor sharing the job's
rate limiter; the driver (executor.py) hands them partitions and writes what they return."""

from __future__ import annotations

import asyncio
import importlib

from graphrag_ray.index.step import StepContext
from graphrag_ray.llm.ledger import UsageLedger, recording_into
from graphrag_ray.llm.model import Models


def load_step(name: str):
    return importlib.import_module(f"graphrag_ray.index.steps.{name}").STEP


class StepWorker:
    def __init__(self, ctx: StepContext, limiter, in_process: bool = False):
        self.ctx = ctx
        self.models = Models.create(ctx.settings, ctx.root, limiter=limiter)
        self.in_process = in_process  # run by pools.LocalPool, not as a Ray actor

    def ready(self) -> str:
        return self._node_id()

    async def run_partition(self, step_name: str, items: list[dict]) -> dict:
        step = load_step(step_name)
        with recording_into(UsageLedger()) as ledger:
            if step.process_batch is not None:
                results = [await step.process_batch(self.ctx, items, self.models)]
            else:
                results = await asyncio.gather(*(step.process(self.ctx, item, self.models) for item in items))
        rows: dict[str, list] = {}
        for result in results:
            for table, table_rows in result.items():
                rows.setdefault(table, []).extend(table_rows)
        return {"rows": rows, "ledger": ledger.to_dict(),
                "node_id": self._node_id()}

    def _node_id(self) -> str:
        if self.in_process:
            return "local"
        import ray  # an actor has it loaded already; in-process runs never need it

        return ray.get_runtime_context().get_node_id()
