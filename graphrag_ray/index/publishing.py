"""Publishing a run: its tables, vectors, BM25 index, carried rows, stats, ledger and (for an update) what changed,
written as a new version of the index and made current at once (storage/tables.py `publish`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.exec.carried import publish_carried
from graphrag_ray.exec.executor import Executor
from graphrag_ray.index.changes import describe_changes
from graphrag_ray.llm.ledger import run_ledger
from graphrag_ray.nlp.lexical import write_lexical
from graphrag_ray.storage.location import Store, disk_full
from graphrag_ray.storage.schemas import REQUIRED_TABLES
from graphrag_ray.storage.tables import publish, write_table

if TYPE_CHECKING:
    from graphrag_ray.index.pipeline import RunPlan

log = logging.getLogger(__name__)


def publish_run(planned: RunPlan, tables, executor: Executor, about: dict, wall: float) -> tuple[Store, dict]:
    """The run's tables written as a new version and made current at once (storage/tables.py publish): a crash
    before the switch leaves the previous version current; a full disk is one line."""
    settings = planned.ctx.settings
    try:
        version, stats = publish(
            planned.output,
            lambda folder: _write_index(folder, tables, planned, executor, about, wall),
            settings.output.keep_versions,
        )
    except Exception as exc:  # an OSError, or a writer's own error quoting the OS's (Polars: ComputeError)
        if not disk_full(exc):
            raise
        raise GraphRagRayError(
            f"no space left on the device while writing the index to {planned.output}; the "
            f"published index is unchanged and the run resumes once there is room"
        ) from None
    log.info("published %s (%s)", version.location, ", ".join(f"{k} {v}" for k, v in stats["rows"].items()))
    return version, stats


def _write_index(folder: Path, tables, planned: RunPlan, executor: Executor, about: dict, wall: float) -> dict:
    ctx, steps = planned.ctx, planned.steps
    settings = ctx.settings
    (folder / "inputs.json").write_text(json.dumps(planned.manifest, ensure_ascii=False), encoding="utf-8")
    rows = {}
    for name in REQUIRED_TABLES:  # one at a time (tables: RunTables, read from the run when asked for)
        table = tables[name]
        write_table(table, folder, name, settings.output.partition_rows)
        rows[name] = int(table.height)
        del table
    write_table(tables["failures"], folder, "failures")
    write_lexical(folder, tables)  # BM25, for queries (nlp/lexical.py)
    for step in steps:
        step.publish(ctx, folder, tables, executor.run.store)
        if step.carries_results:  # each item's rows, for the next update to carry (exec/carried.py)
            publish_carried(executor.run.store, folder, step.name, list(step.yields))
    billed = run_ledger(ctx.paid_dir) if ctx.paid_dir else executor.ledger  # every attempt of this run
    total, attempt = billed.total(), executor.ledger.total()
    stats = {
        **about,
        "wall_s": round(wall, 3),
        "steps": executor.stats,
        "total": {
            "calls": total.calls,
            "prompt_tokens": total.prompt_tokens,
            "cached_tokens": total.cached_tokens,
            "completion_tokens": total.completion_tokens,
            "reasoning_tokens": total.reasoning_tokens,
            "batch_calls": total.batch_calls,
            "cost": round(total.cost, 6),
            "cache_hits": total.cache_hits,
            "retries": total.retries,
            "rate_limited": total.rate_limited,
            "abandoned": total.abandoned,
            "failures": int(tables["failures"].height),
        },
        "this_attempt": {"calls": attempt.calls, "cost": round(attempt.cost, 6)},
        "rows": rows,
    }
    if ctx.previous is not None:  # what changed since the version this run started from, and what it cost
        changes = describe_changes(ctx.previous, tables, executor.ledger)
        for step in steps:  # what a step adds itself (revised reports are not what a full index would write)
            if step.name in executor.stats:
                lines = step.update_lines(executor.stats[step.name])
                changes.update(lines)
                stats.update(lines)
        (folder / "changes.json").write_text(json.dumps(changes, indent=2), encoding="utf-8")
        stats["changes"] = {table: {k: len(v) for k, v in diff.items()} for table, diff in changes["tables"].items()}
    (folder / "stats.json").write_text(json.dumps(stats, indent=2, default=str), encoding="utf-8")
    billed.write_json(folder / settings.reporting.ledger_file)
    return stats
