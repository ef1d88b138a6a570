"""The executor: runs a method's steps in order, fans item steps out over a pool of async workers (Ray actors,
or in this process for small jobs: pools.py), records completion markers as partitions finish, shows progress
and keeps per-step stats.

Steps know nothing of this module. Actors are restartable (max_restarts / max_task_retries), so a killed
worker process or a lost node costs only the partitions it held, which Ray re-runs elsewhere; partitions
already recorded are never recomputed, and calls already answered come from the cache.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, deque
from contextlib import nullcontext
from typing import Any

import polars as pl

from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.index.pools import LocalPool, RayActorPool
from graphrag_ray.index.run_state import RunState
from graphrag_ray.index.step import BatchStep, ItemStep, StepContext, Tables
from graphrag_ray.index.worker import load_step
from graphrag_ray.llm.ledger import UsageLedger
from graphrag_ray.storage.schemas import SCHEMAS

FAILURE_SCHEMA = SCHEMAS["failures"]
PARTITIONS_PER_ACTOR = 2  # in flight per actor: one running, one queued, so no actor idles between partitions


def fingerprint(items: list[dict]) -> str:
    return hashlib.sha256("\n".join(it["item_id"] for it in items).encode()).hexdigest()


class Executor:
    def __init__(self, ctx: StepContext, run: RunState, limiter: Any, progress: Any = None, mode: str = "ray"):
        self.ctx = ctx
        self.run = run
        self.limiter = limiter
        self.mode = mode  # "ray": actors (pools.RayActorPool); "local": in this process (pools.LocalPool)
        self.progress = progress
        self.ledger = UsageLedger()          # what this command spent
        self.stats: dict[str, dict] = {}
        self.node_ids: Counter = Counter()  # partitions run per Ray node (multi-node checks)
        self._workers: RayActorPool | LocalPool | None = None

    # -- steps -------------------------------------------------------------------------------------
    def run_steps(self, names: list[str]) -> Tables:
        tables: Tables = {}
        failures: list[pl.DataFrame] = []
        for name in names:
            step = load_step(name)
            started = time.perf_counter()
            if self.run.step_done(name):
                out = {w: self.run.load_table(w) for w in step.writes}
                stats = {**self.run.step_stats(name), "resumed": True}
            else:
                inputs = {r: tables[r] if r in tables else self.run.load_table(r) for r in step.reads}
                for r in step.optional_reads:
                    found = tables.get(r) if r in tables else self.run.load_table(r)
                    if found is not None:
                        inputs[r] = found
                missing = [r for r, df in inputs.items() if df is None]
                if missing:
                    raise GraphRagRayError(f"step {name}: input tables missing from the run: {', '.join(missing)}")
                before = self.ledger.snapshot()
                if isinstance(step, BatchStep):
                    out = self._batch(step, inputs)
                    stats = {"items": None, "partitions": 0, "resumed_partitions": 0}
                else:
                    out, stats = self._items(step, inputs)
                step_failures = out.pop("failures", None)
                if step_failures is not None and step_failures.height:
                    self.run.save_tables({f"failures__{name}": step_failures})
                stats.update(wall_s=round(time.perf_counter() - started, 3),
                             failures=0 if step_failures is None else step_failures.height,
                             ledger=self.ledger.minus(before).to_dict())
                self.run.save_tables(out)
                self.run.mark_step(name, stats)
                # continue from what is on disk, so a fresh run and a resumed one take the same path
                out = {w: self.run.load_table(w) for w in step.writes}
            tables.update(out)
            failed = self.run.load_table(f"failures__{name}")
            if failed is not None:
                failures.append(failed)
            self.stats[name] = stats
        tables["failures"] = pl.concat(failures, how="diagonal_relaxed") if failures else \
            pl.DataFrame(schema=FAILURE_SCHEMA)
        self.close()
        return tables

    def _batch(self, step: BatchStep, inputs: Tables) -> Tables:
        task = self._task(step.name, 1)
        out = step.run(self.ctx, inputs)
        if task is not None:
            self.progress.update(task, completed=1)
        return out

    # -- item steps --------------------------------------------------------------------------------
    def _items(self, step: ItemStep, inputs: Tables) -> tuple[Tables, dict]:
        size = step.partition_size or self.ctx.settings.workers.partition_size
        names = list(step.partial) + ["failures"]
        collected: dict[str, list[pl.DataFrame]] = {n: [] for n in names}
        earlier: Tables = {}
        counts = Counter(items=0, partitions=0, resumed_partitions=0)  # zeros recorded too
        rounds = step.rounds(self.ctx, inputs)
        task = self._task(step.name, 0)
        for round_index in range(rounds):
            # partitions are cut from items sorted by id: the same work gets the same partitions every run
            items = sorted(step.items(self.ctx, inputs, round_index, earlier), key=lambda it: it["item_id"])
            parts = [items[i:i + size] for i in range(0, len(items), size)]
            counts["items"] += len(items)
            counts["partitions"] += len(parts)
            if task is not None:
                total = (self.progress.tasks[task].total or 0) + len(items)
                self.progress.update(task, total=total)
            round_frames: dict[str, list[pl.DataFrame]] = {n: [] for n in names}
            todo = []
            for p, part in enumerate(parts):
                if self.run.partition_done(step.name, round_index, p, fingerprint(part)):
                    frames, _ = self.run.load_partition(step.name, round_index, p, names)
                    for n, df in frames.items():
                        round_frames[n].append(df)
                    counts["resumed_partitions"] += 1
                    if task is not None:
                        self.progress.update(task, advance=len(part))
                else:
                    todo.append((p, part))
            for p, frames in self._dispatch(step, round_index, todo, task):
                for n, df in frames.items():
                    round_frames[n].append(df)
            for n in names:
                collected[n] += round_frames[n]
                if n != "failures" and round_frames[n]:
                    earlier[n] = pl.concat([earlier[n]] + round_frames[n] if n in earlier else round_frames[n],
                                           how="diagonal_relaxed")
        partial = {n: pl.concat(collected[n], how="diagonal_relaxed") if collected[n]
                   else pl.DataFrame(schema=step.partial[n]) for n in step.partial}
        out = step.finish(self.ctx, inputs, partial)
        if collected["failures"]:
            out["failures"] = pl.concat(collected["failures"], how="diagonal_relaxed")
        return out, dict(counts, rounds=rounds)

    def _task(self, name: str, total: int):
        if not self.progress:
            return None
        total_usage = self.ledger.total()
        return self.progress.add_task(name, total=total, calls=total_usage.calls, cost=total_usage.cost,
                                      tokens=total_usage.prompt_tokens + total_usage.completion_tokens)

    def _frames(self, step: ItemStep, rows: dict[str, list]) -> dict[str, pl.DataFrame]:
        frames = {}
        for name, table_rows in rows.items():
            schema = FAILURE_SCHEMA if name == "failures" else step.partial[name]
            frames[name] = pl.DataFrame(table_rows, schema=schema)
        return frames

    def _dispatch(self, step: ItemStep, round_index: int, todo: list, task) -> list[tuple[int, dict]]:
        if not todo:
            return []
        pool = self._pool()
        load = [0] * len(pool)
        queue = deque(todo)
        in_flight: dict[Any, tuple[int, int, int]] = {}
        partition_items = dict(todo)
        done: list[tuple[int, dict]] = []
        progress = self.progress.update if self.progress else None
        while queue or in_flight:
            while queue and min(load) < PARTITIONS_PER_ACTOR:
                a = load.index(min(load))
                p, part = queue.popleft()
                in_flight[pool.submit(a, step.name, part)] = (p, a, len(part))
                load[a] += 1
            for ref in pool.wait_any(list(in_flight)):
                p, a, n = in_flight.pop(ref)
                load[a] -= 1
                try:
                    result = pool.result(ref)
                except BaseException:
                    pool.cancel(list(in_flight))
                    raise
                frames = self._frames(step, result["rows"])
                self.run.save_partition(step.name, round_index, p, frames, result["ledger"],
                                        fingerprint(partition_items[p]))
                self.ledger.merge(result["ledger"])
                self.node_ids[result["node_id"]] += 1
                done.append((p, frames))
                if progress:
                    total = self.ledger.total()
                    progress(task, advance=n, calls=total.calls, tokens=total.prompt_tokens + total.completion_tokens,
                             cost=total.cost)
        return done

    def _pool(self) -> RayActorPool | LocalPool:
        if self._workers is None:
            self._workers = (LocalPool if self.mode == "local" else RayActorPool)(self.ctx, self.limiter)
        return self._workers

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()
        self._workers = None


def progress_bar(enabled: bool):
    if not enabled:
        return nullcontext(None)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn("[bold]{task.description:<24}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TextColumn("calls {task.fields[calls]:,}  tokens {task.fields[tokens]:,}  "
                               "${task.fields[cost]:.4f}"), TimeElapsedColumn(), TimeRemainingColumn(),
                    transient=False, refresh_per_second=2)  # an index runs for minutes: 2 Hz is plenty
