"""Building and keeping an index: build, update, estimate, prompt-tune, the cache and the published versions."""

from __future__ import annotations

from pathlib import Path

from graphrag_ray.config.load import load_settings
from graphrag_ray.llm.models import Models
from graphrag_ray.storage.location import resolve


def index_methods() -> list[str]:
    from graphrag_ray.index.pipeline import INDEX_METHODS

    return sorted(INDEX_METHODS)


def build_index(
    config=None,
    root: str | Path = ".",
    config_file: str | Path | None = None,
    method: str = "standard",
    resume: bool = True,
    show_progress: bool = False,
    verbose: bool = False,
    retry_failures: bool = False,
    skip_unchanged: bool = False,
    validate: bool = True,
    announce=None,
    batch: bool | None = None,
    detach: bool = False,
    documents=None,
    overrides: dict | None = None,
):
    """Index ROOT's input into ROOT/output (Microsoft GraphRAG's `build_index(config)` shape: pass a loaded
    Settings as `config`, or a root). `retry_failures`: re-run only what the published index lists as failed
    for a transient cause, and publish a new version. `skip_unchanged`: publish nothing when the published index
    is already of this input and these settings, with no failures (`stats["nothing_done"]` says so).
    `validate=False` (the command line's --skip-validation): no endpoint check before the run. `announce(line)`
    gets the run's first line: the Ray cluster it started or joined, or that it runs in this process. `batch`: the
    calls go as the provider's Batch API jobs (None: as settings' batch.enabled says); `detach`: stop once they are
    submitted (`BatchesPending`), the same call later collects them. `documents`: a ray.data.Dataset whose rows
    (id, text, optional title and metadata) are the input instead of ROOT's input folder (api/datasets.py).
    `overrides`: settings merged over ROOT's file (the command line's --no-cache, --output)."""
    from graphrag_ray.index.pipeline import build_index as run

    if config is None and overrides:
        config = load_settings(root, config_file, overrides)
    if documents is not None:
        from graphrag_ray.api.datasets import documents_as_input

        root = Path(root).resolve()
        config = documents_as_input(config or load_settings(root, config_file), root, documents)

    return run(
        root,
        config_file,
        method=method,
        resume=resume,
        show_progress=show_progress,
        verbose=verbose,
        settings=config,
        retry_failures=retry_failures,
        skip_unchanged=skip_unchanged,
        validate=validate,
        announce=announce,
        batch=batch,
        detach=detach,
    )


def update_index(
    root: str | Path = ".",
    config_file: str | Path | None = None,
    resume: bool = True,
    show_progress: bool = False,
    verbose: bool = False,
    method: str | None = None,
    validate: bool = True,
    announce=None,
    batch: bool | None = None,
    detach: bool = False,
    overrides: dict | None = None,
):
    """Bring ROOT's published index up to date with its input (documents added, changed, deleted), at a cost in
    proportion to the change; a new version with `changes.json`. `method`: refused unless it is the published
    index's (an update never changes the method). `announce`, `overrides`: as build_index's."""
    from graphrag_ray.index.pipeline import build_index as run

    return run(
        root,
        config_file,
        settings=load_settings(root, config_file, overrides) if overrides else None,
        method=method,
        resume=resume,
        show_progress=show_progress,
        verbose=verbose,
        update=True,
        validate=validate,
        announce=announce,
        batch=batch,
        detach=detach,
    )


def clear_cache(root: str | Path = ".", config_file: str | Path | None = None, stage: str = "") -> tuple[int, int]:
    """Drop one stage's cached LLM answers (the rest stay): (dropped, kept). Refused while a run holds the root."""
    from graphrag_ray.index.lock import RunLock
    from graphrag_ray.llm.cache import open_cache
    from graphrag_ray.storage.location import resolve_if_rooted

    settings = load_settings(root, config_file)
    with RunLock(Path(root).resolve()):
        return open_cache(resolve_if_rooted(root, settings.cache.base_dir)).clear_stage(stage)


def list_versions(root: str | Path = ".", config_file: str | Path | None = None) -> list[dict]:
    """The published versions, newest first: {version, path, current, and its stats.json (kind, rows, changes...)}."""
    from graphrag_ray.storage.tables import published_versions

    settings = load_settings(root, config_file)
    return published_versions(resolve(root, settings.output.base_dir))


def estimate_index(root: str | Path = ".", config_file: str | Path | None = None, method: str = "standard"):
    """Documents, text units, prompt tokens; expected calls and cost of each stage of `method`. Spends nothing."""
    from graphrag_ray.exec.step import StepContext
    from graphrag_ray.index.estimate import estimate
    from graphrag_ray.index.pipeline import method_steps

    method_steps(method)  # an unknown method is named
    return estimate(StepContext(load_settings(root, config_file), Path(root).resolve()), method)


def prompt_tune(
    root: str | Path = ".",
    config_file: str | Path | None = None,
    sample: int = 12,
    dry_run: bool = False,
    overrides: dict | None = None,
    **options,
):
    """Extraction, summary and report prompts fitted to ROOT's corpus (its language, domain, entity types, a
    worked example), written into ROOT/prompts/ (or `output`) unless `dry_run`. `options`: Microsoft GraphRAG's
    prompt-tune flags (index/prompt_tune.TuneOptions: selection_method, domain, language, max_tokens, ...);
    `sample` is its `limit`. Returns a TunedPrompts."""
    from graphrag_ray.exec.step import StepContext
    from graphrag_ray.index.prompt_tune import TuneOptions, tune

    settings = load_settings(root, config_file, overrides)
    chosen = TuneOptions(**{"limit": sample, **options})
    return tune(StepContext(settings, Path(root).resolve()), Models.create(settings, root), chosen, dry_run)


def submission_id(root: str | Path = ".", config_file: str | Path | None = None, method: str = "standard") -> str:
    from graphrag_ray.index.pipeline import submission_id as make

    return make(root, config_file, method)
