"""The executor: runs a list of steps in order, fans item steps out over a pool of workers (pools.py: Ray actors,
or objects in this process for small jobs), records completion markers as partitions finish (run_state.py), shows
progress and keeps per-step stats.

Steps know nothing of this module. Ray actors are restartable, so a killed worker process or a lost node costs
only the partitions it held, which Ray re-runs elsewhere; partitions already recorded are never recomputed, and
calls already answered come from the cache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import polars as pl

from graphrag_ray.errors import StepFailedError
from graphrag_ray.exec.batched import batched
from graphrag_ray.exec.beside import Beside
from graphrag_ray.exec.carried import KEY_COLUMN, ItemKeys
from graphrag_ray.exec.dispatch import dispatch
from graphrag_ray.exec.held import HeldTables, Wanted, give_back_freed_memory, peak_rss_mb
from graphrag_ray.exec.items import Part, item_count, partitions, sorted_items
from graphrag_ray.exec.pools import Pool, WorkerSpec, open_pool
from graphrag_ray.exec.progress import watching_limits
from graphrag_ray.exec.run_state import RunState
from graphrag_ray.exec.step import (
    BatchStep,
    ItemPlan,
    ItemStep,
    SpilledRows,
    Step,
    StepContext,
    Tables,
    collecting_stats,
    running,
)
from graphrag_ray.exec.worker import StepWorker
from graphrag_ray.llm import metrics
from graphrag_ray.llm.ledger import UsageLedger, run_ledger
from graphrag_ray.storage.schemas import SCHEMAS

log = logging.getLogger(__name__)
FAILURE_SCHEMA = SCHEMAS["failures"]
PARTITIONS_PER_WORKER = 2  # in flight per worker: one running, one queued, so no worker idles between partitions
# a step's partition frames gathered in the driver are joined this many at a time: at 100M tokens extraction's
# 14k small frames held twice the memory of their rows
COMPACT_FRAMES = 64


class Executor:
    def __init__(
        self,
        ctx: StepContext,
        run: RunState,
        limiter: Any,
        progress: Any = None,
        backend: str = "ray",
        max_failure_ratio: float | None = None,
    ):
        self.ctx = ctx
        self.max_failure_ratio = max_failure_ratio  # an item step failing more stops the run (None: never)
        self.run = run
        self.limiter = limiter
        self.backend = backend  # "ray": actors; "local": in this process
        self.progress = progress
        self._task_ledgers: dict = {}  # progress row -> the ledger of its step
        self.ledger = UsageLedger()  # what this command spent
        self.stats: dict[str, dict] = {}
        self.node_ids: Counter = Counter()  # partitions run per Ray node (multi-node checks)
        self._pool: Pool | None = None
        self._lock = threading.Lock()  # the ledger and counters, shared by a background step's thread
        self.beside = Beside(lambda: self._pool)  # work waiting for a step's first dispatch (beside.py)
        # step name -> (gate, future) of its plan's prepare(), run beside the step before it
        self._prepared: dict[str, tuple[threading.Event, Future]] = {}
        self._plans: dict[str, ItemPlan] = {}  # step name -> its driver-side plan in this run

    # -- steps -------------------------------------------------------------------------------------
    def run_steps(self, steps: list[Step], given: Tables | None = None, keep: set[str] | None = None) -> Tables:
        """Run `steps` in order (resuming what the run already finished); `given`: tables no step writes. A
        `background` step runs beside the steps after it until one reads what it writes, its calls using another
        model's limits; it starts once the next step has its first work in flight, so its driver work (Leiden holds
        the GIL) does not hold back calls on the critical path. HeldTables (held.py) owns the tables between steps."""
        held = HeldTables(self.run, steps, given, keep)
        running: dict[str, tuple[Step, Future, threading.Event]] = {}
        background = any(step.background for step in steps)
        lanes = ThreadPoolExecutor(max_workers=2, thread_name_prefix="graphrag-ray-steps") if background else None
        try:
            with watching_limits(self.progress, self.limiter):
                if lanes is not None:
                    self._workers()  # one pool for both lanes, made before either uses it
                for i, step in enumerate(steps):
                    self._join(running, held, set(step.reads) | set(step.optional_reads))
                    if not step.background and i + 1 < len(steps):
                        self._prepare_beside(steps[i + 1])
                    if step.background:
                        gate = self.beside.gate()
                        args = (self._run_step, step, held, held.wanted_after(i), held.snapshot())
                        running[step.name] = (step, lanes.submit(self.beside.run_after, gate, *args), gate)
                    else:
                        held.add(self._run_step(step, held, held.wanted_after(i)))
                        self.beside.open(llm=False)
                    held.after(i)
                self._join(running, held, None)
        finally:
            self.beside.open(llm=True)  # work that never started must not keep its thread waiting
            self.close()  # cancels what a background step still has in flight when the run stops early
            if lanes is not None:
                lanes.shutdown(wait=True, cancel_futures=True)
        self.stats = {step.name: self.stats[step.name] for step in steps if step.name in self.stats}
        return held.final()

    def _prepare_beside(self, following: Step) -> None:
        """What the next step can do without this one's tables (its prepare()), it does while this one waits."""
        prepare = self._preparation(following)
        if prepare is not None and not self.run.step_done(following.name):
            gate = self.beside.gate()
            self._prepared[following.name] = (gate, self.beside.thread(gate, prepare, self.ctx))

    def _plan(self, step: ItemStep) -> ItemPlan:
        """The step's plan for this run, made when first needed (its prepare() may run before the step)."""
        if step.name not in self._plans:
            self._plans[step.name] = step.plan()
        return self._plans[step.name]

    def _preparation(self, step: Step):
        """The step's (or its plan's) prepare(), when it has one of its own."""
        if isinstance(step, ItemStep):
            plan = self._plan(step)
            return plan.prepare if type(plan).prepare is not ItemPlan.prepare else None
        return step.prepare if isinstance(step, BatchStep) and type(step).prepare is not BatchStep.prepare else None

    def _join(
        self, running: dict[str, tuple[Step, Future, threading.Event]], held: HeldTables, reads: set[str] | None
    ) -> None:
        """Wait for the background steps that write one of `reads` (None: all of them); their tables join."""
        for name, (step, future, gate) in list(running.items()):
            if reads is None or reads & set(step.writes):
                self.beside.hurry(gate)
                held.add(future.result())
                del running[name]

    def beside_first_calls(self, work) -> None:
        """Run `work` in a thread once the first step calling models has its first calls out: to do slow work
        that is needed later (imports) while the run waits on the network, not while it sends."""
        self.beside.thread(self.beside.gate(llm_only=True), work)

    def _run_step(
        self, step: Step, held: HeldTables, wanted: Wanted | None = None, tables: Tables | None = None
    ) -> Tables:
        """Run one step (or take its tables from an earlier attempt of the run) on the held tables (or `tables`, a
        background step's snapshot); returns the tables it wrote, read back from the run (of those, only the
        `wanted` ones, and their wanted columns, when given)."""
        started = time.perf_counter()
        if step.name in self._prepared:  # begun beside the step before (or, if that had no calls, now)
            gate, prepared = self._prepared.pop(step.name)
            self.beside.hurry(gate)
            prepared.result()
        if self.run.step_done(step.name):
            self.stats[step.name] = {**self.run.step_stats(step.name), "resumed": True}
            log.info("step %s: done in an earlier attempt of this run, its tables read back", step.name)
            return held.read_back(step, wanted)
        log.info("step %s: starting (%s backend)", step.name, self.backend)
        inputs = held.inputs(step, tables)
        step_ledger = UsageLedger()  # this step's own calls (another step may be spending at the same time)
        with running(step, self.ctx):
            if isinstance(step, BatchStep):
                out, stats = self._batch(step, inputs)
            else:
                out, stats = self._items(step, inputs, step_ledger)
        step_failures = out.pop("failures", None)
        if step_failures is not None and step_failures.height:
            self.run.save_tables({f"failures__{step.name}": step_failures})
        stats.update(
            wall_s=round(time.perf_counter() - started, 3),
            driver_peak_rss_mb=peak_rss_mb(),  # where a large run's driver memory grows
            failures=0 if step_failures is None else step_failures.height,
            ledger=step_ledger.to_dict(),
        )
        self.run.save_tables(out)
        self.run.mark_step(step.name, stats)
        self.stats[step.name] = stats
        log.info(
            "step %s: done in %.1f s (%s items, %s failures, %s calls)",
            step.name,
            stats["wall_s"],
            stats.get("items"),
            stats["failures"],
            step_ledger.total().calls,
        )
        del out, inputs, step_failures  # before the tables are read back: not two copies of them at once
        give_back_freed_memory()
        # continue from what is on disk, so a fresh run and a resumed one take the same path
        return held.read_back(step, wanted)

    def _batch(self, step: BatchStep, inputs: Tables) -> tuple[Tables, dict]:
        task = self._task(step.name, 1)
        with collecting_stats() as counts:
            out = step.run(self.ctx, inputs)
        if task is not None:
            self.progress.update(task, completed=1)
        return out, {"items": None, "partitions": 0, "resumed_partitions": 0, "events": dict(counts)}

    # -- item steps --------------------------------------------------------------------------------
    def _items(self, step: ItemStep, inputs: Tables, step_ledger: UsageLedger) -> tuple[Tables, dict]:
        size = step.partition_size or self.ctx.settings.workers.partition_size
        if batched(self.ctx, step):
            size = self.ctx.settings.batch.partition_size  # a partition's calls of a pass make one Batch API job
        names = list(step.yields) + ["failures"]
        collected: dict[str, list[pl.DataFrame]] = {n: [] for n in names}
        earlier: Tables = {}
        counts = Counter(items=0, partitions=0, resumed_partitions=0, carried_items=0)  # zeros recorded too
        events: Counter = Counter()
        plan = self._plan(step)
        rounds = plan.rounds(self.ctx, inputs)
        task = self._task(step.name, 0, step_ledger)
        failed_parts: list[tuple[int, int]] = []  # (round, partition) of partitions holding failed items
        spilled_parts: list[tuple[int, int]] = []  # every (round, partition), for the spilled yields' files
        keys = ItemKeys(step, self.ctx.previous) if step.carries_results else None
        for round_index in range(rounds):
            # partitions are cut from items sorted by id: the same work gets the same partitions every run
            items = sorted_items(plan.items(self.ctx, inputs, round_index, earlier))
            carried: Tables = {}
            if keys is not None:  # what the version being updated already computed is taken from it
                items, carried = keys.split(round_index, items)
                counts["carried_items"] += keys.carried_in_round
            parts = partitions(items, size)
            counts["items"] += item_count(items)
            metrics.gauge("graphrag_ray_items_total", counts["items"], "work items of the step", step=step.name)
            counts["partitions"] += len(parts)
            if task is not None:
                self.progress.update(task, total=(self.progress.tasks[task].total or 0) + item_count(items))
            round_frames = self._round(
                step, round_index, parts, names, task, counts, events, failed_parts, step_ledger, keys
            )
            spilled_parts += [(round_index, p) for p in range(len(parts))]
            del items, parts  # a large run's items (text units' text, entities' descriptions) are let go now
            for n in names:
                collected[n] += round_frames[n] + ([carried[n]] if n in carried else [])
                if n != "failures" and round_index + 1 < rounds:  # only a next round reads it
                    new = [
                        df.drop(KEY_COLUMN, strict=False)
                        for df in round_frames[n] + [carried.get(n)]
                        if df is not None and df.height
                    ]
                    if new:
                        earlier[n] = pl.concat(([earlier[n]] if n in earlier else []) + new, how="diagonal_relaxed")
            del round_frames, carried
        earlier.clear()
        if task is not None and not self.progress.tasks[task].total:  # nothing was dispatched: said done
            self.progress.update(task, completed=0)
        # each table's partition frames are let go as they are joined: never two copies of a step's rows
        yielded = {
            n: pl.concat(collected.pop(n), how="diagonal_relaxed")
            if collected[n]
            else pl.DataFrame(schema=step.yields[n])
            for n in step.yields
            if n not in step.spilled
        }
        if keys is not None:  # kept for the next update (published with the index), then the key column goes
            yielded = keys.save(self.run, yielded)
        for n in step.spilled:  # left on disk, in partition order
            paths = [self.run.partition_file(step.name, r, p, n) for r, p in spilled_parts]
            yielded[n] = SpilledRows(self.run.store, [path for path in paths if path is not None])
        self._check_failures(step, counts["items"], collected["failures"], failed_parts)
        with collecting_stats() as finish_events:
            out = plan.finish(self.ctx, inputs, yielded)
        del self._plans[step.name]  # what it kept (the previous version's rows) is let go with the step
        events.update(finish_events)
        if collected["failures"]:
            out["failures"] = pl.concat(collected["failures"], how="diagonal_relaxed")
        return out, dict(counts, rounds=rounds, events=dict(events))

    def _round(
        self,
        step: ItemStep,
        round_index: int,
        parts: list[Part],
        names: list[str],
        task,
        counts: Counter,
        events: Counter,
        failed_parts: list,
        step_ledger: UsageLedger,
        keys: ItemKeys | None = None,
    ) -> dict[str, list[pl.DataFrame]]:
        """One round's partitions: those a marker says are done are read back, the rest dispatched to workers and
        recorded as each finishes. Returns each table's frames."""
        frames_of: dict[str, list[pl.DataFrame]] = {n: [] for n in names}
        loose = Counter()  # per table: frames gathered since the last were joined

        def keep(p: int, part: Part, frames: dict[str, pl.DataFrame], stats: dict) -> None:
            for name, df in frames.items():
                if name not in step.spilled:  # those stay in their partition files
                    gathered = frames_of[name]
                    gathered.append(df)
                    loose[name] += 1
                    if loose[name] == COMPACT_FRAMES:  # the last ones made one, in the order they came
                        gathered[-COMPACT_FRAMES:] = [
                            pl.concat(gathered[-COMPACT_FRAMES:], how="diagonal_relaxed", rechunk=True)
                        ]
                        loose[name] = 0
            if "failures" in frames and frames["failures"].height:
                failed_parts.append((round_index, p))
            if keys is not None:
                keys.finished(part, frames.get("failures"))
            events.update(stats)
            self._advance(task, len(part))
            metrics.count("graphrag_ray_items_done", len(part), "work items done", step=step.name)
            part.release()

        todo = []
        for p, part in enumerate(parts):
            if self.run.partition_done(step.name, round_index, p, part):
                frames, spent = self.run.load_partition(
                    step.name, round_index, p, [n for n in names if n not in step.spilled]
                )
                counts["resumed_partitions"] += 1
                keep(p, part, frames, spent.get("stats", {}))
            else:
                todo.append((p, part))

        def finished(entry: tuple[int, Part], result: dict) -> None:
            p, part = entry
            frames = {
                name: pl.DataFrame(rows, schema=FAILURE_SCHEMA if name == "failures" else step.yields[name])
                for name, rows in result["rows"].items()
            }
            if keys is not None:
                frames = keys.tagged(part, frames, result["spans"])
            self.run.save_partition(
                step.name, round_index, p, part, frames, {**result["ledger"], "stats": result["stats"]}
            )
            with self._lock:
                self.ledger.merge(result["ledger"])
                step_ledger.merge(result["ledger"])
                self.node_ids[result["node_id"]] += 1
            keep(p, part, frames, result["stats"])

        # the background work waiting for this step starts once its first partitions are out (or it has none)
        in_flight = None if step.background else lambda: self.beside.open(llm=step.uses_llm)
        if todo:
            dispatch(
                self._workers(),
                todo,
                "run_partition",
                lambda entry: (step, entry[1].items()),
                finished,
                PARTITIONS_PER_WORKER,
                started=in_flight,
            )
        elif in_flight is not None:
            in_flight()
        return frames_of

    def _check_failures(self, step: ItemStep, items: int, failures: list[pl.DataFrame], failed_parts: list) -> None:
        """A step that mostly failed must not publish: stop with its most common reason, and forget the markers of
        the partitions holding failed items, so a re-run retries exactly those (the rest resumes)."""
        failed = sum(df.height for df in failures)
        if self.max_failure_ratio is None or not items or failed / items <= self.max_failure_ratio:
            return
        for round_index, p in failed_parts:
            self.run.forget_partition(step.name, round_index, p)
        # a reason may end with how the model's answer began: group by what went wrong, show one answer
        reasons = pl.concat(failures, how="diagonal_relaxed").select(
            pl.col("reason").str.split(" | answer began: ").list.first().str.slice(0, 300).alias("kind"),
            pl.col("reason").str.split(" | answer began: ").list.get(1, null_on_oob=True).alias("sample"),
        )
        reason, times = reasons["kind"].value_counts(sort=True).row(0)
        sample = reasons.filter(pl.col("kind") == reason)["sample"].drop_nulls().head(1).to_list()
        with self._lock:
            billed = run_ledger(self.ctx.paid_dir) if self.ctx.paid_dir else self.ledger  # every attempt so far
            spent = billed.total()
            where = self.run.save_ledger(billed.to_dict())
        raise StepFailedError(
            f"{step.name}: {failed} of {items} items failed ({failed / items:.0%}, more than "
            f"output.max_failure_ratio {self.max_failure_ratio:.0%}); most common reason "
            f"({times}x): {reason}{f'; the answer began: {sample[0]}' if sample else ''}. "
            f"Nothing was published; the same command (or `index --retry-failures`) asks the model "
            f"again for the failed items only - the rest resumes, and answers it found unusable "
            f"are not reused. Spent: {spent.calls:,} "
            f"calls ({spent.unusable:,} unusable), ${spent.cost:.4f} - ledger in {where}"
        )

    def _task(self, name: str, total: int, ledger: UsageLedger | None = None):
        """A progress row for a step; its figures are the step's own (`ledger`), not the run's running totals."""
        if not self.progress:
            return None
        task = self.progress.add_task(name, total=total, calls=0, cost=0.0, tokens=0)
        self._task_ledgers[task] = ledger
        return task

    def _advance(self, task, n: int) -> None:
        if task is None:
            return
        ledger = self._task_ledgers.get(task)
        with self._lock:
            usage = ledger.total() if ledger is not None else None
        figures = (
            {}
            if usage is None
            else {"calls": usage.calls, "cost": usage.cost, "tokens": usage.prompt_tokens + usage.completion_tokens}
        )
        self.progress.update(task, advance=n, **figures)

    def start_workers(self) -> None:
        """Start the pool's workers now (Ray actors take about a second), before the first step needs them."""
        self._workers()

    def _workers(self) -> Pool:
        if self._pool is None:
            spec = WorkerSpec(StepWorker, (self.ctx, self.limiter), num_cpus=self.ctx.settings.workers.actor_cpus)
            self._pool = open_pool(self.backend, spec, self.ctx.settings.workers.num_actors)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self._pool = None
