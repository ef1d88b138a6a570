"""Index methods (plain lists of step names) and one index run in three phases, as Microsoft GraphRAG's
run_pipeline: `plan_run` (index, update, retry or nothing to do, and the refusals), `run_planned` (the steps under
the project's lock, on the executor that fits), `publish_run` (index/publishing.py)."""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from graphrag_ray.config.load import load_settings
from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import ConfigError, GraphRagRayError, IndexMissingError, UsageError
from graphrag_ray.exec.executor import Executor
from graphrag_ray.exec.progress import progress_bar
from graphrag_ray.exec.run_state import RunState
from graphrag_ray.exec.runtime import choose_backend, job_limiter, ray_running, where_ray_runs
from graphrag_ray.exec.step import Step, StepContext
from graphrag_ray.index.input import check_columns, discover
from graphrag_ray.index.lock import RunLock
from graphrag_ray.index.publishing import publish_run
from graphrag_ray.llm.concurrency import limiter_snapshot, provider_limits, warm_start
from graphrag_ray.llm.ledger import UsageLedger
from graphrag_ray.llm.preflight import check_endpoints
from graphrag_ray.storage.location import FoundFile, Store, disk_full, resolve
from graphrag_ray.storage.schemas import REQUIRED_TABLES
from graphrag_ray.storage.tables import current_index, read_table

log = logging.getLogger(__name__)

INDEX_METHODS: dict[str, list[str]] = {
    # background steps run beside the steps after them until one reads what they write: embed_text_units beside
    # extraction and what follows (until embed needs its vectors), communities beside the summaries
    "standard": [
        "parse_documents",
        "load_documents",
        "chunk",
        "embed_text_units",
        "extract_graph",
        "extract_claims",
        "merge_graph",
        "resolve_entities",
        "communities",
        "summarize_descriptions",
        "community_reports",
        "embed",
        "finalize",
    ],
    # no LLM at index time: NLP graph, joined descriptions, extractive reports (LazyGraphRAG / FastGraphRAG's idea)
    "fast": [
        "parse_documents",
        "load_documents",
        "chunk",
        "embed_text_units",
        "nlp_graph",
        "merge_graph",
        "join_descriptions",
        "communities",
        "extractive_reports",
        "embed",
        "finalize",
    ],
}


# Settings that change what is computed (and so the run id); workers, limits, prices and keys do not.
_MODEL_RESULT_KEYS = ("type", "model", "encoding", "max_tokens", "temperature", "dimensions")


# steps a plug-in (or a test) adds by name, besides the modules of graphrag_ray/index/steps/
_REGISTERED_STEPS: dict[str, type[Step]] = {}


def register_step(step: type[Step]) -> None:
    """Make a step class usable by name in a method (`register_method`)."""
    _REGISTERED_STEPS[step.name] = step


def register_method(name: str, steps: list[str]) -> None:
    """A method is a list of step names: `index --method NAME` runs these."""
    if name in INDEX_METHODS:
        raise ValueError(f"index method {name!r} exists already")
    INDEX_METHODS[name] = list(steps)


def load_step(name: str) -> Step:
    """A fresh instance of the step: what a step keeps in the driver during a run (the version an update
    revises, later rounds' items) belongs to that run - two runs in one process never share it."""
    if name in _REGISTERED_STEPS:
        return _REGISTERED_STEPS[name]()
    return type(importlib.import_module(f"graphrag_ray.index.steps.{name}").STEP)()


def method_steps(method: str) -> list[Step]:
    if method not in INDEX_METHODS:
        raise ConfigError(f"--method {method}: unknown method (have: {', '.join(INDEX_METHODS)})")
    return [load_step(name) for name in INDEX_METHODS[method]]


@dataclass
class IndexResult:
    output: Path | str  # the output setting: a folder or an object-store URI
    run_id: str
    stats: dict
    ledger: UsageLedger
    node_ids: dict = field(default_factory=dict)
    index: Store | None = None  # the published version this run wrote


def graph_sections(method: str) -> dict[str, set[str]]:
    """The settings sections that decide what a method's graph is, as its steps declare them
    (`Step.settings_section`), each with its keys that do not (how an update revises). An `update` refuses when
    one changed; input, query, worker, cache and output settings - and the sections of steps the method does not
    run - do not make the existing graph wrong."""
    sections: dict[str, set[str]] = {}
    for step in method_steps(method):
        if step.settings_section is not None:
            neutral = set(step.graph_neutral_keys())
            known = sections.get(step.settings_section)
            sections[step.settings_section] = neutral if known is None else known & neutral
    return sections


def graph_fingerprint(ctx: StepContext, method: str) -> str:
    """What the published graph was computed with: method, graph settings, models' result-deciding keys, prompts."""
    sections = graph_sections(method)
    settings = ctx.settings.model_dump(
        mode="json", include=set(sections), exclude={name: keys for name, keys in sections.items() if keys}
    )
    models = {
        k: {f: v for f, v in m.model_dump(mode="json").items() if f in _MODEL_RESULT_KEYS}
        for k, m in ctx.settings.models.items()
    }
    prompts = {
        p: hashlib.sha256(ctx.prompt(p).encode()).hexdigest()
        for p in declared_prompts(method_steps(method), ctx.settings)
    }
    material = json.dumps([method, settings, models, prompts], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def input_manifest(files: list[FoundFile]) -> list[list]:
    """[source, sha256, bytes] of every input file: what the input is, and (kept with each version as
    inputs.json) what the next update compares with."""
    return [[file.source, hashlib.sha256(file.read_bytes()).hexdigest(), file.size] for file in files]


def input_id_for(
    ctx: StepContext, method: str, files: list[FoundFile] | None = None, manifest: list[list] | None = None
) -> str:
    """What decides an index's content: all settings but workers/batch/cache/reporting, models' result keys,
    prompts, and the input's content."""
    settings = ctx.settings.model_dump(mode="json", exclude={"workers", "batch", "cache", "reporting", "models"})
    if manifest is None:
        manifest = input_manifest(discover(ctx.settings, ctx.root) if files is None else files)
    material = json.dumps(
        [graph_fingerprint(ctx, method), settings, [entry[:2] for entry in manifest]],
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def changed_input_bytes(manifest: list[list], previous: list[list] | None) -> int:
    """The bytes of the input files an update reads anew (new or changed since the version it updates); every
    file's when that version kept no manifest."""
    known = {(source, digest) for source, digest, *_ in previous or []}
    return sum(size for source, digest, size in manifest if previous is None or (source, digest) not in known)


def run_id_for(ctx: StepContext, method: str, files: list[FoundFile] | None = None, input_id: str | None = None) -> str:
    """One run's id (its resumable state): the input id, and for an update the version it starts from (its
    numbers are carried over)."""
    base = input_id or input_id_for(ctx, method, files)
    if ctx.previous is None:
        return base
    return hashlib.sha256(f"{base}:{ctx.previous.location}".encode()).hexdigest()[:16]


def submission_id(root: str | Path, config_file: str | Path | None = None, method: str = "standard") -> str:
    """`ray job submit --submission-id $(graphrag-ray submission-id --root R)`: the same settings and input give
    the same id, and Ray refuses a second job with an id it already has - no duplicate submits."""
    root = Path(root).resolve()
    return f"graphrag-ray-{method}-{run_id_for(StepContext(load_settings(root, config_file), root), method)}"


def published_tables(steps: list[Step]) -> set[str]:
    """What a run of these steps publishes (the executor lets go of every other table once no later step reads
    it): the required tables, and what each step declares it publishes."""
    return {*REQUIRED_TABLES, *(name for step in steps for name in step.publishes)}


def declared_prompts(steps: list[Step], settings: Settings, update: bool = False) -> list[str]:
    """Every prompt file the steps read with these settings, as they declare them (`Step.prompts`)."""
    return list(dict.fromkeys(path for step in steps for path in step.prompts(settings, update)))


@dataclass
class RunPlan:
    """What a run will do, decided before any lock or worker: its kind, its method's steps, its input."""

    ctx: StepContext
    output: Path | str
    method: str
    steps: list[Step]
    files: list[FoundFile]
    manifest: list[list]  # input_manifest(files)
    input_id: str
    kind: str  # "index", "update" or "retry"
    published_stats: dict | None = None  # of the version an update or a retry starts from
    retried: int | None = None  # a retry: how many of the published failures it can fix
    force_resume: bool = False  # a retry of a run that never published: it resumes, whatever --no-resume says

    @property
    def update(self) -> bool:
        return self.kind == "update"


def build_index(
    root: str | Path = ".",
    config_file: str | Path | None = None,
    method: str | None = "standard",
    resume: bool = True,
    show_progress: bool = False,
    verbose: bool = False,
    settings: Settings | None = None,
    retry_failures: bool = False,
    update: bool = False,
    skip_unchanged: bool = False,
    validate: bool = True,
    announce: Callable[[str], None] | None = None,
    batch: bool | None = None,
    detach: bool = False,
) -> IndexResult:
    """One index run, published as a new version: planned (`plan_run`), run under the project's lock
    (`run_planned`), published (`publish_run`).

    `update`: the corpus changed since the published index; the run starts from it - its numbers are carried over,
    and everything whose inputs did not change is answered by the cache (no call) - and the new version gets a
    `changes.json`. Refused when the graph settings, models or prompts changed (that needs a full index).
    `retry_failures`: the same run again on top of the published index, for the items its `failures` table lists
    from a model call - every other item is answered by the cache, an answer cached unusable is asked anew.
    `skip_unchanged` (the command line's `index` without --force): when the published index is of this very input,
    method, settings and prompts and lists no failures, nothing is run or published (a new identical version would
    take one of the kept slots). `validate=False`: the endpoints are not checked first (Microsoft GraphRAG's
    --skip-validation); a bad key is then said by the first call. `announce` gets the run's first line: where it
    runs (the Ray cluster it started or joined: address, nodes, CPUs; or this process). `batch` (None: the
    settings' `batch.enabled`): the calls go as Batch API jobs; `detach`: stop once they are submitted."""
    root = Path(root).resolve()
    settings = _with_batch(settings or load_settings(root, config_file), batch, detach)
    planned = plan_run(StepContext(settings, root), method, update, retry_failures, skip_unchanged)
    if isinstance(planned, IndexResult):  # nothing to do
        return planned
    # with Ray running, the workers start while the endpoints are checked (in run_planned); otherwise a bad key
    # is said before anything starts
    workers_first = ray_running()
    if not workers_first and validate:
        _check_models(settings, planned.steps)
    with RunLock(root):
        return run_planned(planned, resume, show_progress, verbose, validate and workers_first, announce)


def _with_batch(settings: Settings, batch: bool | None, detach: bool) -> Settings:
    """The settings with the command line's --batch / --detach."""
    if batch is None and not detach:
        return settings
    settings = settings.model_copy(deep=True)
    settings.batch.enabled = (settings.batch.enabled if batch is None else batch) or detach
    settings.batch.detach = detach
    return settings


def plan_run(
    ctx: StepContext, method: str | None, update: bool, retry_failures: bool, skip_unchanged: bool
) -> RunPlan | IndexResult:
    """What to run - or the published index as it is, when there is nothing to do; the refusals (a changed graph
    for an update, a changed input for a retry) before anything starts."""
    settings, root = ctx.settings, ctx.root
    output = resolve(root, settings.output.base_dir)
    published_stats, force_resume = None, False
    if retry_failures and not update and current_index(output) is None:
        # a run that failed before publishing: resuming it retries exactly its failed items (their partitions
        # were forgotten when it stopped), and answers cached unusable are asked again
        log.warning("--retry-failures: no published index in %s; resuming the unpublished run", output)
        retry_failures, force_resume = False, True
    if update or retry_failures:
        ctx.previous, published_stats = _published(output, "update" if update else "--retry-failures")
        built_with = published_stats.get("method", "standard")
        if update and method not in (None, built_with):
            raise UsageError(
                f"update --method {method}: the published index in {output} was built with the "
                f"{built_with} method, and an update keeps it; run `graphrag-ray index --method "
                f"{method}` for a {method} index"
            )
        method = built_with
    method = method or "standard"
    steps = method_steps(method)
    for path in declared_prompts(steps, settings, update):
        ctx.prompt(path)  # a missing prompt file fails now, before any work
    if published_stats is not None and published_stats.get("graph_fingerprint") not in (
        None,
        graph_fingerprint(ctx, method),
    ):
        raise GraphRagRayError(
            "the graph settings, models or prompts changed since the published index was built: "
            "an update would mix two graphs; run a full `graphrag-ray index`"
        )
    files = discover(settings, root)
    check_columns(settings, files)
    manifest = input_manifest(files)
    input_id = input_id_for(ctx, method, manifest=manifest)
    kind = "update" if update else "retry" if retry_failures else "index"
    planned = RunPlan(
        ctx, output, method, steps, files, manifest, input_id, kind, published_stats, force_resume=force_resume
    )
    if update and input_id == published_stats.get("input_id"):
        return _published_result(output, published_stats, "unchanged")
    if skip_unchanged and kind == "index" and (published := current_index(output)) is not None:
        stats = _json(published, "stats.json") or {}
        if stats.get("input_id") == input_id and not stats.get("total", {}).get("failures"):
            return _published_result(output, stats, "index unchanged")
    if retry_failures:
        if input_id != published_stats.get("input_id"):
            raise GraphRagRayError(
                "--retry-failures: the input, settings or prompts changed since the published "
                "index: run `graphrag-ray update` (or `graphrag-ray index`)"
            )
        planned.retried = _failures_to_retry(ctx.previous, steps)
        if not planned.retried:
            return _published_result(output, published_stats, "nothing to retry")
        ctx.retry_unusable = True
    return planned


def run_planned(
    planned: RunPlan,
    resume: bool,
    show_progress: bool,
    verbose: bool,
    check_while_starting: bool,
    announce: Callable[[str], None] | None,
) -> IndexResult:
    """The steps of a planned run on the executor it chooses, then its publication (under the caller's lock)."""
    ctx, settings = planned.ctx, planned.ctx.settings
    run_id = run_id_for(ctx, planned.method, planned.files, planned.input_id)
    runs = Store(resolve(ctx.root, settings.output.runs_dir))
    run = RunState(runs.child(run_id))
    if not resume and not planned.force_resume:
        run.reset()
    # every attempt of this run journals what it pays beside the run's folder (kept by --no-resume too), so the
    # published ledger is what the provider billed for the whole run, not what the last attempt paid
    paid = runs.child(f"paid-{run_id}")
    ctx.paid_dir = paid.location
    ctx.batch_dir = runs.child(f"batches-{run_id}").location  # kept by --no-resume too: no job is sent twice
    backend, why_here = _choose_executor(planned)
    limiter = job_limiter(backend, run_id, verbose)  # starts or joins Ray for the ray backend
    runs_on = where_ray_runs() if backend == "ray" else why_here  # (what Ray it runs on is known once joined)
    (announce or log.info)(runs_on)
    previous_limits = (planned.published_stats or {}).get("provider_limits") or {}
    warm = warm_start(limiter, previous_limits, settings.models) if planned.update else []
    started = time.perf_counter()
    with progress_bar(show_progress) as progress:
        executor = Executor(ctx, run, limiter, progress, backend, settings.output.max_failure_ratio)
        if check_while_starting:
            try:  # Ray's actors start (about a second) while the endpoints answer; nothing is sent before
                if backend == "ray":
                    executor.start_workers()
                _check_models(settings, planned.steps)
            except BaseException:
                executor.close()
                raise
        # modules slow to import (about a second each: lancedb, igraph, leidenalg) and needed only later are
        # imported while the run waits on its first model calls - not at the start, where they held the GIL the
        # run's first steps and first requests needed
        steps = planned.steps
        slow = list(dict.fromkeys(m for step in steps if step.enabled(settings) for m in step.slow_imports))
        if slow:
            executor.beside_first_calls(lambda: [importlib.import_module(m) for m in slow])
        try:
            tables = executor.run_steps(steps, keep=published_tables(steps))
        except Exception as exc:
            if not disk_full(exc):
                raise
            raise GraphRagRayError(
                f"no space left on the device while writing the run's state to {runs.location}; the published "
                "index is unchanged and the run resumes once there is room"
            ) from None
    about = {
        "run_id": run_id,
        "input_id": planned.input_id,
        "method": planned.method,
        "graph_fingerprint": graph_fingerprint(ctx, planned.method),
        "executor": backend,
        "runs_on": runs_on,
        "started_warm": warm,
        "provider_limits": provider_limits(limiter_snapshot(limiter), settings.models),
        "kind": planned.kind,
        **({"retried": planned.retried} if planned.retried is not None else {}),
    }
    version, stats = publish_run(planned, tables, executor, about, time.perf_counter() - started)
    run.reset()
    paid.delete_tree()
    return IndexResult(planned.output, run_id, stats, executor.ledger, dict(executor.node_ids), version)


def _choose_executor(planned: RunPlan) -> tuple[str, str]:
    """Ray or this process, and (for this process) the run's first line saying why. What the run reads anew
    decides whether Ray's start-up pays: an update of a few documents runs here, cluster or not."""
    workers = planned.ctx.settings.workers
    if planned.update:
        work_bytes = changed_input_bytes(planned.manifest, _json(planned.ctx.previous, "inputs.json"))
    else:
        work_bytes = sum(f.size for f in planned.files)
    backend = choose_backend(
        workers.executor, work_bytes, workers.local_max_input_mb, not planned.update, workers.ray_min_cpus
    )
    if backend == "ray":
        return backend, ""
    why = _why_local(workers, work_bytes)
    return backend, f"running in this process, no Ray (workers.executor: {workers.executor}{why})"


def _why_local(workers, work_bytes: int) -> str:
    """Why `auto` chose this process: the input is small, or this machine has too few CPUs for Ray to pay."""
    if workers.executor != "auto":
        return ""
    if work_bytes <= workers.local_max_input_mb * 2**20:
        return f": input within local_max_input_mb {workers.local_max_input_mb:g}"
    return f": {os.cpu_count() or 1} CPUs, under ray_min_cpus {workers.ray_min_cpus}, and no cluster to join"


def _check_models(settings: Settings, steps: list[Step]) -> None:
    """Exactly the models the method's steps will call, each checked before anything is spent."""
    needed = [m for step in steps for m in step.model_ids(settings)]
    try:
        check_endpoints(settings, needed)
        if settings.batch.enabled and settings.batch.fallback == "fail":  # said before the run, not at its first job
            from graphrag_ray.llm.batch_api import check_batch_endpoints

            check_batch_endpoints(settings, needed)
    except GraphRagRayError as exc:
        if {getattr(settings.models.get(m), "type", None) for m in needed} == {"embedding"}:
            # no chat model: the method can run with no endpoint at all (the fast method): say how
            raise type(exc)(
                f"{exc}. This method calls no chat model and can run with no endpoint: set the "
                "embedding model's `type: local_embedding` (vectors computed here)"
            ) from None
        raise


def _published(output, command: str) -> tuple[Store, dict]:
    published = current_index(output)
    if published is None:
        raise IndexMissingError(f"{command}: no published index in {output} (run `graphrag-ray index` first)")
    return published, _json(published, "stats.json") or {}


def _failures_to_retry(published: Store, steps: list[Step]) -> int:
    """How many of the published index's failures a retry run can fix: those of LLM steps (timeouts, 5xx, rate
    limits past their deadline, unusable answers - a fatal error stops a run instead of listing items)."""
    failures = read_table(published, "failures")
    llm_steps = [step.name for step in steps if step.uses_llm]
    return 0 if failures is None else failures.filter(pl.col("step").is_in(llm_steps)).height


def _published_result(output, stats: dict, why: str) -> IndexResult:
    """Nothing to do: the published index as it is, with nothing spent; `stats["nothing_done"]` says why."""
    return IndexResult(
        output, stats.get("run_id", ""), {**stats, "nothing_done": why}, UsageLedger(), {}, current_index(output)
    )


def _json(version: Store | None, name: str):
    """A JSON file of a published version (None when it has none: written by an earlier release)."""
    raw = version.read_bytes(name) if version is not None else None
    return json.loads(raw) if raw else None
