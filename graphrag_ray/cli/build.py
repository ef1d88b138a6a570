"""Commands that build and keep an index: init, check, index, update, versions, estimate, prompt-tune."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from graphrag_ray.cli import (
    BatchOpt,
    CacheOpt,
    ConfigOpt,
    DetachOpt,
    OutputOpt,
    RootOpt,
    SkipValidationOpt,
    _console,
    _overrides,
    app,
    cache_app,
    verbose,
)


@app.command()
def init(
    root: Path = RootOpt,
    force: bool = typer.Option(
        False, help="rewrite settings.yaml and the prompts (edited ones kept as .bak copies; .env is never rewritten)"
    ),
    from_msgraphrag: Path | None = typer.Option(
        None,
        "--from-msgraphrag",
        help="a Microsoft GraphRAG "
        "settings.yaml (2.x or 3.x): our settings and prompts are "
        "written from it, saying what has no counterpart",
    ),
) -> None:
    """Create a project: settings.yaml, prompts/, input/ and a .env for the API key."""
    from graphrag_ray import api

    if from_msgraphrag is not None:
        written, notes = api.init_from_msgraphrag(root, from_msgraphrag, force=force)
    else:
        written, notes = api.init_project(root, force=force), []
    for path in written:
        typer.echo(f"kept the previous file as {path}" if path.suffix == ".bak" else f"wrote {path}")
    if from_msgraphrag is not None and not any(p.name == "settings.yaml" for p in written):
        typer.echo(f"{root / 'settings.yaml'} exists: left as it is (`--force` writes it from theirs, keeping a copy)")
    for note in notes:
        typer.echo(f"from Microsoft GraphRAG: {note}")
    typer.echo(
        f"next: put documents in {root / 'input'}, set GRAPHRAG_API_KEY in {root / '.env'}, "
        f"then `graphrag-ray index --root {root}`"
        if from_msgraphrag is None
        else f"next: `graphrag-ray check --root {root}`, then `graphrag-ray index --root {root}`"
    )


@app.command()
def check(root: Path = RootOpt, config: Path | None = ConfigOpt) -> None:
    """Validate the settings and send one tiny request to every configured model."""
    from graphrag_ray.api import check_models

    for line in check_models(root, config):
        typer.echo(line)


@app.command()
def index(
    ctx: typer.Context,
    root: Path = RootOpt,
    config: Path | None = ConfigOpt,
    method: str = typer.Option(
        "standard",
        help="index method: standard (LLM graph) | fast (no LLM); "
        "standard-update | fast-update run `update` (Microsoft GraphRAG's names)",
    ),
    resume: bool = typer.Option(True, "--resume/--no-resume", help="continue an interrupted run"),
    cache: bool = CacheOpt,
    output: Path | None = OutputOpt,
    skip_validation: bool = SkipValidationOpt,
    dry_run: bool = typer.Option(False, "--dry-run", help="count and price the work; call nothing"),
    rehearse: bool = typer.Option(
        False,
        "--rehearse",
        help="run against a simulator that enforces the "
        "configured RPM/TPM, and report what the real run would cost and take",
    ),
    latency: float = typer.Option(0.5, help="simulated seconds per call, with --rehearse"),
    force: bool = typer.Option(
        False,
        "--force",
        help="build and publish even when the published index is "
        "already of this input and settings (after `cache clear`, say)",
    ),
    retry_failures: bool = typer.Option(
        False,
        "--retry-failures",
        help="re-run only the items the published index lists in failures "
        "(transient causes), and publish a new version",
    ),
    batch: bool | None = BatchOpt,
    detach: bool = DetachOpt,
) -> None:
    """Build the index: documents -> text units -> graph -> communities -> reports -> embeddings."""
    if method.endswith("-update") and not (dry_run or rehearse or retry_failures):
        return update(
            ctx,
            root=root,
            config=config,
            resume=resume,
            cache=cache,
            output=output,
            skip_validation=skip_validation,
            method=method.removesuffix("-update"),
            batch=batch,
            detach=detach,
        )
    overrides = _overrides(cache, output)
    if dry_run:
        return estimate(root=root, config=config, method=method)
    console = _console()
    progress = True if sys.stderr.isatty() else "plain"  # plain lines for a log (ray job submit, CI)
    if rehearse:
        from graphrag_ray.rehearse import rehearse as run_rehearsal

        outcome = run_rehearsal(
            root,
            config,
            method=method,
            latency=latency,
            show_progress=progress,
            verbose=verbose(ctx),
            overrides=overrides,
        )
        console.print(outcome.result.ledger.rich_table("Rehearsal: LLM usage the real run would have"))
        console.print(outcome.summary())
        return
    from graphrag_ray.api import build_index

    result = build_index(
        root=root,
        config_file=config,
        method=method,
        resume=resume,
        show_progress=progress,
        verbose=verbose(ctx),
        retry_failures=retry_failures,
        skip_unchanged=not force and cache and resume,  # --no-cache / --no-resume: asked to run
        validate=not skip_validation,
        announce=lambda line: console.print(line, highlight=False),
        batch=batch,
        detach=detach,
        overrides=overrides,
    )
    _report_run(result, console)


def _report_run(result, console) -> None:
    """What an index / update / retry run published (or why it did nothing)."""
    why = result.stats.get("nothing_done")
    if why == "nothing to retry":
        console.print(
            f"nothing to retry: the published index lists {result.stats['total']['failures']} failures, "
            "none of them from a model call"
        )
        return
    if why == "unchanged":
        console.print("nothing to update: the input is as the published index has it")
        return
    if why == "index unchanged":
        console.print(
            "nothing to index: the published index is of this input, method, settings and prompts, with "
            "no failures (`--force` builds it again)"
        )
        return
    usage = result.ledger.total()
    if usage.calls or usage.cache_hits or usage.failures:
        console.print(result.ledger.rich_table(f"LLM usage (run {result.run_id})"))
    else:
        console.print("no LLM calls (nothing to pay)")
    if result.stats.get("kind") == "retry":
        console.print(f"retried the {result.stats['retried']} failed items on top of the published index")
    if "changes" in result.stats:
        console.print(
            "changes: "
            + (
                "; ".join(
                    f"{table} " + ", ".join(f"{n} {k}" for k, n in diff.items() if n)
                    for table, diff in result.stats["changes"].items()
                    if any(diff.values())
                )
                or "no table rows changed"
            )
        )
    written = result.stats.get("reports_written")
    if written:
        console.print(
            f"community reports: {written['afresh']} written afresh, {written['revised']} revised from "
            f"their previous report and the changed rows, {written['kept']} kept"
        )
    total, attempt = result.stats["total"], result.stats.get("this_attempt")
    if attempt is not None and attempt["calls"] != total["calls"]:  # earlier attempts of the run paid too
        console.print(
            f"billed for the whole run (every attempt): {total['calls']:,} calls, ${total['cost']:.4f}; "
            f"this attempt {attempt['calls']:,} calls, ${attempt['cost']:.4f}"
        )
    ended = sum((step.get("events") or {}).get("gleanings_unusable", 0) for step in result.stats["steps"].values())
    if ended:  # the usage table's failures that failed no item: said here, so its count and the line below agree
        console.print(
            f"{ended:,} gleaning rounds ended on an answer unusable twice (both paid: in `unusable`; counted in the "
            "table's failures): their items kept what the first answers found, so no item failed for it"
        )
    rows = ", ".join(f"{k} {v:,}" for k, v in result.stats["rows"].items())
    failures = total["failures"]
    console.print(f"index published to {result.output}: {rows}; failures {failures}; {result.stats['wall_s']:.1f}s")
    unread = (result.stats["steps"].get("load_documents") or {}).get("failures", 0)
    if unread:  # no model is asked again for a file that cannot be read: the file has to change
        console.print(
            f"{unread} input files or rows could not be read (encrypted, corrupt, no text...): their reasons are in "
            "failures.parquet of that version (`graphrag-ray report` lists them); fix them and run `update`"
        )
    if failures - unread:
        console.print(
            f"{failures - unread} items failed: their reasons are in failures.parquet of that version "
            "(`graphrag-ray report` lists them); `graphrag-ray index --retry-failures` asks the model again for "
            "them only"
        )


@app.command()
def update(
    ctx: typer.Context,
    root: Path = RootOpt,
    config: Path | None = ConfigOpt,
    resume: bool = typer.Option(True, "--resume/--no-resume", help="continue an interrupted update"),
    cache: bool = CacheOpt,
    output: Path | None = OutputOpt,
    skip_validation: bool = SkipValidationOpt,
    method: str | None = typer.Option(
        None, help="the published index's method (an update keeps it; another is refused)"
    ),
    batch: bool | None = BatchOpt,
    detach: bool = DetachOpt,
) -> None:
    """Bring the published index up to date with the input: documents added, changed or deleted cost calls in
    proportion to the change; published as a new version with a changes.json."""
    overrides = _overrides(cache, output)
    from graphrag_ray.api import update_index

    console = _console()
    result = update_index(
        root=root,
        config_file=config,
        resume=resume,
        show_progress=True if sys.stderr.isatty() else "plain",
        verbose=verbose(ctx),
        method=method,
        validate=not skip_validation,
        announce=lambda line: console.print(line, highlight=False),
        batch=batch,
        detach=detach,
        overrides=overrides,
    )
    _report_run(result, console)


@app.command()
def versions(root: Path = RootOpt, config: Path | None = ConfigOpt) -> None:
    """The published versions of the index, newest first (CURRENT marked); read one with `query --data PATH`."""
    from rich.table import Table

    from graphrag_ray.api import list_versions

    table = Table(title="index versions")
    table.add_column("")
    table.add_column("version", no_wrap=True)
    for column in ("kind", "documents", "entities", "reports", "calls", "changes (added/changed/removed)"):
        table.add_column(column)
    found = list_versions(root, config)
    for v in found:
        rows = v.get("rows", {})
        changes = v.get("changes") or {}
        summary = ", ".join(
            f"{t} +{d.get('added', 0)}/~{d.get('changed', 0)}/-{d.get('removed', 0)}"
            for t, d in changes.items()
            if t in ("documents", "entities") and any(d.values())
        )
        table.add_row(
            "*" if v["current"] else "",
            v["version"],
            v.get("kind", "index"),
            f"{rows.get('documents', 0):,}",
            f"{rows.get('entities', 0):,}",
            f"{rows.get('community_reports', 0):,}",
            f"{v.get('total', {}).get('calls', 0):,}",
            summary,
        )
    console = _console()
    console.print(table)
    if found:
        folder = found[0]["path"].rsplit("/", 1)[0]
        console.print(f"* = published. Query an older one with: graphrag-ray query --data {folder}/VERSION ...")


@app.command()
def estimate(
    root: Path = RootOpt,
    config: Path | None = ConfigOpt,
    method: str = typer.Option("standard", help="index method: standard (LLM graph) | fast (no LLM)"),
) -> None:
    """Count documents, text units and prompt tokens; print expected calls, tokens and cost. Spends nothing."""
    from graphrag_ray.api import estimate_index

    result = estimate_index(root, config, method)
    console = _console()
    console.print(result.rich_table())
    for line in result.unpriced:
        console.print(line, highlight=False)
    if result.failures:
        console.print(f"{result.failures} input documents would be skipped (see failures after indexing)")
    console.print(
        f"expected: {result.total_calls:,} calls, about ${result.total_cost:.4f} "
        "(extraction counted exactly; later stages projected)"
    )


@app.command("prompt-tune")
def prompt_tune(
    root: Path = RootOpt,
    config: Path | None = ConfigOpt,
    limit: int = typer.Option(
        12, "--limit", "--sample", help="text units shown to the model (selection even, random, top)"
    ),
    selection_method: str = typer.Option(
        "even",
        help="even (spread over the corpus) | random | top "
        "(the first) | all | auto (the --k nearest the centroid of "
        "--n-subset-max random ones, by the embedding model)",
    ),
    n_subset_max: int = typer.Option(300, help="auto: text units embedded"),
    k: int = typer.Option(15, help="auto: text units kept"),
    domain: str | None = typer.Option(None, help="the corpus's domain (found by the model otherwise)"),
    language: str | None = typer.Option(None, help="the corpus's language (detected otherwise)"),
    discover_entity_types: bool = typer.Option(
        True,
        "--discover-entity-types/--no-discover-entity-types",
        help="let the model choose the entity types (off: the prompt keeps settings' extract_graph.entity_types)",
    ),
    max_tokens: int = typer.Option(4000, help="token budget of the samples in the tuning prompt"),
    chunk_size: int | None = typer.Option(None, help="tokens per sampled text unit (settings' chunks.size otherwise)"),
    overlap: int | None = typer.Option(None, help="overlap of the sampled text units"),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="write the prompts into this folder (default: where settings read them)"
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the prompts; write nothing"),
    cache: bool = CacheOpt,
) -> None:
    """Fit the extraction, summary and report prompts to the corpus (language, domain, entity types, example)."""
    overrides = _overrides(cache)
    from graphrag_ray import api

    result = api.prompt_tune(
        root,
        config,
        limit,
        dry_run,
        selection_method=selection_method,
        n_subset_max=n_subset_max,
        k=k,
        domain=domain,
        language=language,
        discover_entity_types=discover_entity_types,
        max_tokens=max_tokens,
        chunk_size=chunk_size,
        overlap=overlap,
        output=output.resolve() if output else None,
        overrides=overrides,
    )
    if dry_run:
        for relative, text in result.prompts.items():
            typer.echo(f"===== {relative} =====\n{text}")
    typer.echo(result.summary())


@app.command("submission-id")
def submission_id_cmd(
    root: Path = RootOpt, config: Path | None = ConfigOpt, method: str = typer.Option("standard", help="index method")
) -> None:
    """Print a deterministic Ray job submission id for this root's settings and input (no duplicate submits)."""
    from graphrag_ray.api import submission_id

    typer.echo(submission_id(root, config, method))


@cache_app.command("clear")
def cache_clear(
    stage: str = typer.Option(
        ...,
        "--stage",
        help="the stage whose answers go, e.g. extract_graph, "
        "summarize_descriptions, community_reports, query_global_map",
    ),
    root: Path = RootOpt,
    config: Path | None = ConfigOpt,
) -> None:
    """Drop one stage's cached answers, so the next run asks the model again for that stage only."""
    from graphrag_ray.api import clear_cache

    dropped, kept = clear_cache(root, config, stage)
    typer.echo(
        f"cache: dropped {dropped:,} answers of stage {stage}, kept {kept:,} of other stages"
        + ("" if dropped else " (answers cached before this version carry no stage and stay)")
        + "; `graphrag-ray index --force` asks the model again for them"
    )
