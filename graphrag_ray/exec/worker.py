"""The worker that runs item steps' partitions: many run at once (Ray actors, or objects in this process), each
with the job's models sharing one rate limiter; the driver (executor.py) hands them partitions and writes what they
return."""

from __future__ import annotations

import asyncio

from graphrag_ray.errors import LLMUnavailableError
from graphrag_ray.exec.batched import WAITING, batched, in_batches
from graphrag_ray.exec.step import ItemStep, StepContext, collecting_stats, running
from graphrag_ray.llm.batch_collect import Deferred
from graphrag_ray.llm.ledger import PaidJournal, UsageLedger, recording_into
from graphrag_ray.llm.models import Models
from graphrag_ray.llm.tokens import load_in_background


class StepWorker:
    def __init__(self, ctx: StepContext, limiter):
        self.ctx = ctx
        self.models = Models.create(
            ctx.settings,
            ctx.root,
            limiter=limiter,
            cautious_start=True,
            retry_unusable=ctx.retry_unusable,
            journal=PaidJournal(ctx.paid_dir) if ctx.paid_dir else None,
        )
        # every call counts its tokens first: a new worker process builds the tokenizers (a third of a second
        # each) while the first steps run, not when its first call is about to go out
        for model, encoding in sorted(
            {(m.model, m.encoding or "") for m in ctx.settings.models.values() if m.type != "local_embedding"}
        ):
            load_in_background(model, encoding or None)

    async def aclose(self) -> None:
        """Its models' SDK clients on this loop closed (the in-process pool, before it stops its loop)."""
        await self.models.aclose()

    async def run_partition(self, step: ItemStep, items: list[dict]) -> dict:
        with recording_into(UsageLedger()) as ledger, collecting_stats() as stats, running(step, self.ctx):
            if batched(self.ctx, step):  # calls wait for Batch API jobs (batched.py)
                results = await in_batches(self.ctx, items, lambda todo: self._each(step, todo, waits=True))
            elif step.process_batch is not None:
                # one Rows for the batch, or one per item (what a carrying step gives: its rows are kept per item)
                batch = await _or_failures(step, items, step.process_batch(self.ctx, items, self.models))
                results = batch if isinstance(batch, list) else [batch]
            else:
                results = await self._each(step, items)
        if self.models.journal is not None:  # what the partition recorded, on disk before its rows are
            self.models.journal.flush()
        rows: dict[str, list] = {}
        for result in results:
            for table, table_rows in result.items():
                rows.setdefault(table, []).extend(table_rows)
        answer = {"rows": rows, "ledger": ledger.to_dict(), "stats": dict(stats), "node_id": node_id()}
        if step.carries_results:  # how many rows of each table each item yielded, in item order
            answer["spans"] = {table: [len(result.get(table, ())) for result in results] for table in rows}
        return answer

    async def _each(self, step: ItemStep, items: list[dict], waits: bool = False) -> list:
        """Each item's rows (or failures row); with `waits`, WAITING for an item whose call waits for a job. A step
        that batches its own calls gets the items together, as it would without jobs (the same calls): all of them
        wait while any of its calls does."""
        if step.process_batch is not None:
            try:
                batch = await _or_failures(step, items, step.process_batch(self.ctx, items, self.models))
            except Deferred:
                return [WAITING] * len(items)
            return batch if isinstance(batch, list) else [batch] + [{}] * (len(items) - 1)
        work = (_or_failures(step, [item], step.process(self.ctx, item, self.models)) for item in items)
        return await asyncio.gather(*((_or_waiting(w) if waits else w) for w in work))


async def _or_waiting(work):
    try:
        return await work
    except Deferred:
        return WAITING


async def _or_failures(step: ItemStep, items: list[dict], work) -> dict:
    """The rows `work` yields, or - its model call could not be had (the endpoint is down past its retries, the
    answers stayed unusable) - a failures row per item: the run goes on, and `--retry-failures` redoes them."""
    try:
        return await work
    except LLMUnavailableError as exc:
        return {"failures": [step.failure_row(item, exc) for item in items]}


def node_id() -> str:
    """The Ray node of the actor this runs in; "local" for a worker in the driver's own process."""
    from graphrag_ray.exec.runtime import ray_running

    if not ray_running():
        return "local"
    import ray

    context = ray.get_runtime_context()
    return context.get_node_id() if context.get_actor_id() is not None else "local"
