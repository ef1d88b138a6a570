"""A partition of an item step in batch mode (`index --batch`): its items run in passes. In each pass every chat call
the cache cannot answer is written down instead of sent (llm/batch_collect.py) and its item waits; the pass's
requests go to the provider's Batch API as one job per model (split within the provider's file limits); once the
job ends, its answers go through the same parser, ledger and cache as synchronous answers, and the waiting items run
again - finding those answers in the cache, and waiting again on their next call, if they make one (an extraction,
then its gleaning round). A pass in which no item waits is the partition's last: its rows are the partition's.

Jobs are named by the digest of the requests they hold (and the attempt at them), written into the run's state
(`runs/batches-<run id>/`) as soon as each is made and given to the provider as metadata: a command killed or
stopped while a job is out finds it again and collects it - nothing is submitted twice. Lines a job did not answer
(failed, or never reached by a job that expired) go into the next pass's job, and after `batch.resubmit` such jobs
are sent synchronously. `batch.detach`: once the jobs are submitted, the command stops, saying how to collect them."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable

from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.llm.batch_api import BatchAPI, BatchState, BatchUnsupportedError, split_lines
from graphrag_ray.llm.batch_collect import BatchCollector, PendingRequest, collecting, requests_digest
from graphrag_ray.llm.outcomes import TransientLLMError
from graphrag_ray.storage.location import Store

log = logging.getLogger(__name__)

WAITING = object()  # an item whose next call waits for a Batch API job
MAX_POLL_ERRORS = 10  # polls in a row that could not reach the provider before the run stops


class BatchesPending(GraphRagRayError):
    """`--detach`: the jobs are out; the same command collects them. Not an error (exit 0)."""

    exit_code = 0


def batched(ctx, step) -> bool:
    """Whether this step's partitions run in batch mode: `batch.enabled`, and the step calls a chat model."""
    if not (ctx.settings.batch.enabled and step.uses_llm and step.settings_section):
        return False
    model_id = getattr(getattr(ctx.settings, step.settings_section), "model_id", None)
    return model_id in ctx.settings.models and ctx.settings.models[model_id].type == "chat"


async def in_batches(ctx, items: list[dict], run: Callable[[list[dict]], Awaitable[list]]) -> list:
    """Each item's result, `run(items)` giving one per item (or WAITING) pass after pass, with the Batch API jobs
    between the passes answering what the items wait for."""
    results: dict[int, object] = {}
    todo = list(range(len(items)))
    synchronous: set[str] = set()  # requests whose jobs kept failing: sent as usual
    misses: Counter = Counter()  # per request: jobs that held it and did not answer it
    models = set()  # the models whose answers came from jobs: they forget them with the partition
    try:
        while todo:
            collector = BatchCollector(synchronous)
            with collecting(collector):
                got = await run([items[i] for i in todo])
            waiting = [i for i, result in zip(todo, got) if result is WAITING]
            results.update((i, result) for i, result in zip(todo, got) if result is not WAITING)
            if waiting:
                models.update(request.model for request in collector.pending.values())
                await _answered(ctx, list(collector.pending.values()), misses, synchronous)
            todo = waiting
    finally:
        for model in models:
            model.batch_answers.clear()
    return [results[i] for i in range(len(items))]


async def _answered(ctx, pending: list[PendingRequest], misses: Counter, synchronous: set[str]) -> None:
    """One job per model for these requests (or the jobs already made of them), waited for, their answers taken."""
    by_model: dict[str, list[PendingRequest]] = {}
    for request in pending:
        by_model.setdefault(request.model.model_id, []).append(request)
    for requests in by_model.values():
        model = requests[0].model
        api = BatchAPI(model.model_id, model.config)
        try:
            try:
                states = await _jobs(ctx, api, requests, misses)
            except BatchUnsupportedError:
                if ctx.settings.batch.fallback != "sync":
                    raise
                log.warning("%s: no Batch API; the calls are made synchronously (batch.fallback: sync)", api.where)
                synchronous.update(r.key for r in requests)
                continue
            answered = set()
            for state in states:
                answers, failed = await api.results(state)
                for request in requests:
                    if request.key in answers:
                        request.model.accept_batch_answer(
                            request.key, request.stage, request.messages, answers[request.key]
                        )
                        answered.add(request.key)
                if failed:
                    log.info("batch %s: %d requests failed (%s)", state.id, len(failed), _reasons(failed))
        finally:
            await api.close()
        for request in requests:
            if request.key not in answered:
                misses[request.key] += 1
                if misses[request.key] > ctx.settings.batch.resubmit:
                    synchronous.add(request.key)


async def _jobs(ctx, api: BatchAPI, requests: list[PendingRequest], misses: Counter) -> list[BatchState]:
    """The ended jobs holding these requests: made now, or found in the run's state or at the provider."""
    cfg = ctx.settings.batch
    keys = [r.key for r in requests]
    digest = requests_digest(keys, max(misses[k] for k in keys))
    store = Store(ctx.batch_dir)
    written = store.read_bytes(f"{digest}.json")
    ids = json.loads(written)["batches"] if written else await api.find(digest)
    if not ids:
        lines = [r.line(api.endpoint) for r in sorted(requests, key=lambda r: r.key)]
        for chunk in split_lines(lines, cfg.max_requests_per_file, int(cfg.max_file_mb * 1024 * 1024)):
            ids.append(await api.submit(chunk, digest))
            record = {"batches": ids, "model": api.model_id, "requests": len(lines), "submitted_at": time.time()}
            store.write_bytes(f"{digest}.json", json.dumps(record).encode())
        _say(f"{api.where}: {len(lines):,} requests submitted to the Batch API as {', '.join(ids)}")
    return await _ended(api, ids, cfg)


async def _ended(api: BatchAPI, ids: list[str], cfg) -> list[BatchState]:
    errors, last_line = 0, ""
    while True:
        try:
            states = [await api.state(batch_id) for batch_id in ids]
            errors = 0
        except TransientLLMError as exc:
            errors += 1
            if errors >= MAX_POLL_ERRORS:
                raise
            log.warning("%s (will look again)", exc)
            await asyncio.sleep(cfg.poll_interval_s)
            continue
        line = "; ".join(
            f"{s.id} {s.status}: {s.completed:,}/{s.total:,} answered, {s.failed:,} failed" for s in states
        )
        if line != last_line:
            _say(f"Batch API: {line}")
            last_line = line
        if all(s.done for s in states):
            return states
        if cfg.detach:
            raise BatchesPending(
                f"submitted to the Batch API and not finished yet: {', '.join(ids)} ({line}). Run the same "
                "command again to collect them and go on (nothing is submitted twice)"
            )
        await asyncio.sleep(cfg.poll_interval_s)


def _reasons(failed: dict[str, str]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in Counter(failed.values()).most_common(3))


def _say(line: str) -> None:
    """A status line for the person running the command (a worker's stderr reaches the driver's terminal)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
