"""`graphrag-ray` command line: thin typer layer over graphrag_ray.api.

A mistake a user can make prints one line `error: ...` and exits non-zero; --verbose adds the traceback.
"""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path
from typing import Optional

import typer

from graphrag_ray import __version__
from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.secrets import install_log_redaction, redact

app = typer.Typer(name="graphrag-ray", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="GraphRAG as a distributed, resumable batch engine on Ray.")
tokenizers_app = typer.Typer(help="Offline tokenizer files for tiktoken.", no_args_is_help=True)
app.add_typer(tokenizers_app, name="tokenizers")
cache_app = typer.Typer(help="The LLM response cache.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")

_STATE = {"verbose": False}

RootOpt = typer.Option(Path("."), "--root", "-r", help="project root (settings.yaml, input/, output/)")
ConfigOpt = typer.Option(None, "--config", "-c", help="settings file (default: ROOT/settings.yaml)")
DataOpt = typer.Option(None, "--data", help="index folder or s3:// / gs:// URI (default: output.base_dir)")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"graphrag-ray {__version__}")
        raise typer.Exit()


@app.callback()
def root(verbose: bool = typer.Option(False, "--verbose", "-v", help="log details; show tracebacks on errors"),
         version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="print the version and exit")) -> None:
    _STATE["verbose"] = verbose
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_log_redaction()


def _use_cache(cache: bool) -> None:
    """--no-cache: every settings file this command reads has the LLM response cache off."""
    from graphrag_ray.config.load import set_command_overrides

    set_command_overrides({} if cache else {"cache": {"enabled": False}})


@app.command()
def init(root: Path = RootOpt, force: bool = typer.Option(False, help="overwrite existing files")) -> None:
    """Create a project: settings.yaml, prompts/, input/ and a .env for the API key."""
    from graphrag_ray.api import init_project

    written = init_project(root, force=force)
    for path in written:
        typer.echo(f"wrote {path}")
    typer.echo(f"next: put documents in {root / 'input'}, set GRAPHRAG_API_KEY in {root / '.env'}, "
               f"then `graphrag-ray index --root {root}`")


@app.command()
def check(root: Path = RootOpt, config: Optional[Path] = ConfigOpt) -> None:
    """Validate the settings and send one tiny request to every configured model."""
    from graphrag_ray.api import check_models

    for line in check_models(root, config):
        typer.echo(line)


@app.command()
def index(root: Path = RootOpt, config: Optional[Path] = ConfigOpt,
          method: str = typer.Option("standard", help="index method: standard (LLM graph) | fast (no LLM)"),
          resume: bool = typer.Option(True, "--resume/--no-resume", help="continue an interrupted run"),
          cache: bool = typer.Option(True, "--cache/--no-cache", help="use the LLM response cache (--no-cache: "
                                     "ask the model for everything; nothing is read from or written to it)"),
          dry_run: bool = typer.Option(False, "--dry-run", help="count and price the work; call nothing"),
          rehearse: bool = typer.Option(False, "--rehearse", help="run against a simulator that enforces the "
                                        "configured RPM/TPM, and report what the real run would cost and take"),
          latency: float = typer.Option(0.5, help="simulated seconds per call, with --rehearse"),
          retry_failures: bool = typer.Option(False, "--retry-failures",
                                              help="re-run only the items the published index lists in failures "
                                              "(transient causes), and publish a new version"),
          ) -> None:
    """Build the index: documents -> text units -> graph -> communities -> reports -> embeddings."""
    _use_cache(cache)
    if dry_run:
        return estimate(root=root, config=config)
    console = _console()
    progress = True if sys.stderr.isatty() else "plain"  # plain lines for a log (ray job submit, CI)
    if rehearse:
        from graphrag_ray.rehearse import rehearse as run_rehearsal

        outcome = run_rehearsal(root, config, method=method, latency=latency, show_progress=progress,
                                verbose=_STATE["verbose"])
        console.print(outcome.result.ledger.rich_table("Rehearsal: LLM usage the real run would have"))
        console.print(outcome.summary())
        return
    from graphrag_ray.api import build_index

    result = build_index(root=root, config_file=config, method=method, resume=resume, show_progress=progress,
                         verbose=_STATE["verbose"], retry_failures=retry_failures)
    _report_run(result, console)


def _report_run(result, console) -> None:
    """What an index / update / retry run published (or why it did nothing)."""
    why = result.stats.get("nothing_done")
    if why == "nothing to retry":
        console.print(f"nothing to retry: the published index lists {result.stats['total']['failures']} failures, "
                      "none of them from a model call")
        return
    if why == "unchanged":
        console.print("nothing to update: the input is as the published index has it")
        return
    console.print(result.ledger.rich_table(f"LLM usage (run {result.run_id})"))
    if result.stats.get("kind") == "retry":
        console.print(f"retried the {result.stats['retried']} failed items on top of the published index")
    if "changes" in result.stats:
        console.print("changes: " + ("; ".join(
            f"{table} " + ", ".join(f"{n} {k}" for k, n in diff.items() if n)
            for table, diff in result.stats["changes"].items() if any(diff.values())) or "no table rows changed"))
    written = result.stats.get("reports_written")
    if written:
        console.print(f"community reports: {written['afresh']} written afresh, {written['revised']} revised from "
                      f"their previous report and the changed rows, {written['kept']} kept")
    total, attempt = result.stats["total"], result.stats.get("this_attempt")
    if attempt is not None and attempt["calls"] != total["calls"]:  # earlier attempts of the run paid too
        console.print(f"billed for the whole run (every attempt): {total['calls']:,} calls, ${total['cost']:.4f}; "
                      f"this attempt {attempt['calls']:,} calls, ${attempt['cost']:.4f}")
    rows = ", ".join(f"{k} {v:,}" for k, v in result.stats["rows"].items())
    failures = total["failures"]
    console.print(f"index published to {result.output}: {rows}; failures {failures}; "
                  f"{result.stats['wall_s']:.1f}s")
    if failures:
        console.print(f"{failures} items failed: their reasons are in failures.parquet of that version (`graphrag-ray "
                      f"report` lists them); `graphrag-ray index --retry-failures` asks the model again for them only")


@app.command()
def update(root: Path = RootOpt, config: Optional[Path] = ConfigOpt,
           resume: bool = typer.Option(True, "--resume/--no-resume", help="continue an interrupted update"),
           cache: bool = typer.Option(True, "--cache/--no-cache", help="use the LLM response cache (--no-cache: "
                                     "ask the model for everything; nothing is read from or written to it)"),
) -> None:
    """Bring the published index up to date with the input: documents added, changed or deleted cost calls in
    proportion to the change; published as a new version with a changes.json."""
    _use_cache(cache)
    from graphrag_ray.api import update_index

    result = update_index(root=root, config_file=config, resume=resume,
                          show_progress=True if sys.stderr.isatty() else "plain",
                          verbose=_STATE["verbose"])
    _report_run(result, _console())


@app.command()
def versions(root: Path = RootOpt, config: Optional[Path] = ConfigOpt) -> None:
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
        summary = ", ".join(f"{t} +{d.get('added', 0)}/~{d.get('changed', 0)}/-{d.get('removed', 0)}"
                            for t, d in changes.items() if t in ("documents", "entities") and any(d.values()))
        table.add_row("*" if v["current"] else "", v["version"], v.get("kind", "index"),
                      f"{rows.get('documents', 0):,}", f"{rows.get('entities', 0):,}",
                      f"{rows.get('community_reports', 0):,}", f"{v.get('total', {}).get('calls', 0):,}", summary)
    console = _console()
    console.print(table)
    if found:
        folder = found[0]["path"].rsplit("/", 1)[0]
        console.print(f"* = published. Query an older one with: graphrag-ray query --data {folder}/VERSION ...")


LevelOpt = typer.Option(None, "--level", help="community level whose communities colour / label the graph "
                        "(default: 0, the broadest)")


@app.command()
def export(root: Path = RootOpt, config: Optional[Path] = ConfigOpt, data: Optional[str] = DataOpt,
           fmt: str = typer.Option("graphml", "--format", "-f", help="graphml | gexf | csv | neo4j"),
           level: Optional[int] = LevelOpt,
           out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder (default: ROOT/export/FORMAT)")) -> None:
    """Write the graph for other tools: GraphML / GEXF (Gephi, Cytoscape, networkx), CSV, or Neo4j's import CSV."""
    from graphrag_ray.api import export_graph

    written = export_graph(root, fmt, out, level, config, data)
    for path in written:
        typer.echo(str(path))
    if fmt == "neo4j":
        typer.echo(f"load into a stopped Neo4j 5 from NEO4J_HOME with: bash {written[-1]}")


@app.command()
def view(root: Path = RootOpt, config: Optional[Path] = ConfigOpt, data: Optional[str] = DataOpt,
         level: Optional[int] = LevelOpt,
         max_nodes: int = typer.Option(1500, "--max-nodes", help="entities drawn (the top ones by degree; all are "
                                       "searchable)"),
         out: Optional[Path] = typer.Option(None, "--out", "-o", help="HTML file (default: ROOT/graph.html)")) -> None:
    """One self-contained HTML file showing the graph by community: search, descriptions, relationships, reports."""
    from graphrag_ray.api import write_graph_view

    typer.echo(str(write_graph_view(root, out, level, max_nodes, config, data)))


@app.command()
def report(root: Path = RootOpt, config: Optional[Path] = ConfigOpt, data: Optional[str] = DataOpt,
           out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder (default: ROOT/report)")) -> None:
    """A Markdown + PNG report of the index: tables, entity types, degrees, communities, cost per step, failures."""
    from graphrag_ray.api import write_index_report

    typer.echo(str(write_index_report(root, out, config, data)))


@app.command()
def estimate(root: Path = RootOpt, config: Optional[Path] = ConfigOpt) -> None:
    """Count documents, text units and prompt tokens; print expected calls, tokens and cost. Spends nothing."""
    from graphrag_ray.api import estimate_index

    result = estimate_index(root, config)
    console = _console()
    console.print(result.rich_table())
    if result.failures:
        console.print(f"{result.failures} input documents would be skipped (see failures after indexing)")
    console.print(f"expected: {result.total_calls:,} calls, about ${result.total_cost:.4f} "
                  "(extraction counted exactly; later stages projected)")


@app.command("prompt-tune")
def prompt_tune(root: Path = RootOpt, config: Optional[Path] = ConfigOpt,
                sample: int = typer.Option(12, "--sample", help="text units shown to the model"),
                dry_run: bool = typer.Option(False, "--dry-run", help="print the prompts; write nothing"),
                cache: bool = typer.Option(True, "--cache/--no-cache", help="use the LLM response cache (--no-cache: "
                                     "ask the model for everything; nothing is read from or written to it)"),
) -> None:
    """Fit the extraction, summary and report prompts to the corpus (language, domain, entity types, example)."""
    _use_cache(cache)
    from graphrag_ray import api

    result = api.prompt_tune(root, config, sample, dry_run)
    if dry_run:
        for relative, text in result.prompts.items():
            typer.echo(f"===== {relative} =====\n{text}")
    typer.echo(result.summary())


def _console():
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 140)


def _question_text(question: str | None, query_opt: str | None, query_file: Path | None) -> str:
    given = [name for name, value in (("QUESTION", question), ("--query", query_opt), ("--query-file", query_file))
             if value is not None]
    if len(given) > 1:
        raise typer.BadParameter(f"give the question once: {' and '.join(given)} were both given")
    if query_file is not None and str(query_file) != "-":
        try:
            return query_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise typer.BadParameter(f"cannot read {query_file}: {exc}", param_hint="--query-file") from None
    if question == "-" or (query_file is not None and str(query_file) == "-"):
        return sys.stdin.read().strip()
    return query_opt or question or ""


@app.command()
def query(question: Optional[str] = typer.Argument(None, help="the question (or use --query)"),
          query_opt: Optional[str] = typer.Option(None, "--query", "-q", help="the question"),
          query_file: Optional[Path] = typer.Option(None, "--query-file", help="read the question from a file "
                                                    "('-': standard input), for long questions"),
          method: str = typer.Option("local", "--method", "-m",
                                     help="local | global | drift | basic | hybrid | auto (or contextual)"),
          root: Path = RootOpt, config: Optional[Path] = ConfigOpt,
          data: Optional[str] = DataOpt,
          community_level: Optional[int] = typer.Option(None, "--community-level",
                                                        help="Leiden level of the reports (default 2)"),
          dynamic_community_selection: bool = typer.Option(False, "--dynamic-community-selection/"
                                                           "--no-dynamic-community-selection",
                                                           help="global search rates reports from the root down"),
          response_type: Optional[str] = typer.Option(None, "--response-type",
                                                      help="e.g. 'Multiple Paragraphs', 'Single Sentence'"),
          streaming: bool = typer.Option(False, "--streaming/--no-streaming", help="print the answer as it comes"),
          context_only: bool = typer.Option(False, "--context-only", help="print the context; no answer call"),
          no_llm: bool = typer.Option(False, "--no-llm", help="answer with evidence sentences; no LLM call "
                                      "(automatic when the chat model has no API key)"),
          cache: bool = typer.Option(True, "--cache/--no-cache", help="use the LLM response cache (--no-cache: "
                                     "ask the model for everything; nothing is read from or written to it)"),
          ) -> None:
    """Ask the index a question (QUESTION '-' reads it from standard input)."""
    _use_cache(cache)
    text = _question_text(question, query_opt, query_file)
    from graphrag_ray import api

    method = api.check_question(text, method, community_level)  # before the index loads
    if streaming and not context_only:
        finished = []

        async def stream():
            shown = False
            try:
                async for piece in api.search_streaming(text, method, root, config, data, community_level,
                                                        dynamic_community_selection, response_type, no_llm=no_llm,
                                                        on_result=finished.append):
                    sys.stdout.write(piece)
                    sys.stdout.flush()
                    shown = shown or bool(piece)
            finally:  # a stream cut mid-answer: its error goes on a line of its own
                if shown:
                    sys.stdout.write("\n")
                    sys.stdout.flush()

        api.run_async(stream())
        result = finished[0]
        if "route" in result.details:
            sys.stderr.write(f"route: {result.details['route']} ({result.details['route_reason']})\n")
    else:
        result = api.run_async(api.search(text, method, root, config, data, community_level,
                                          dynamic_community_selection, response_type, context_only=context_only,
                                          no_llm=no_llm))
        if "route" in result.details:
            typer.echo(f"route: {result.details['route']} ({result.details['route_reason']})")
        typer.echo(result.context_text if context_only else result.response)
    sys.stderr.write(result.usage_line() + "\n")


@app.command()
def chat(root: Path = RootOpt, config: Optional[Path] = ConfigOpt,
         data: Optional[str] = DataOpt,
         questions: int = typer.Option(3, help="follow-up questions suggested after each answer"),
         response_type: str = typer.Option("Single Paragraph", "--response-type"),
         no_llm: bool = typer.Option(False, "--no-llm", help="extractive answers and follow-ups; no LLM call")
         ) -> None:
    """A conversation with the index: local search, streaming, history and numbered follow-ups."""
    from graphrag_ray.api import chat as chat_loop

    chat_loop(root, config, data, question_count=questions, response_type=response_type, no_llm=no_llm)


@app.command("eval")
def eval_(root: Path = RootOpt, config: Optional[Path] = ConfigOpt,
          questions: Optional[Path] = typer.Option(None, "--questions", help="csv/jsonl: question, id, gold_answer, "
                                                   "gold_evidence (text-unit ids)"),
          generate: Optional[int] = typer.Option(None, "--generate", help="make N questions from the index"),
          methods: str = typer.Option("local,global", help="comma-separated: local, global, drift, basic, hybrid, "
                                      "evidence (the no-LLM baseline)"),
          judge: bool = typer.Option(True, "--judge/--no-judge", help="pairwise LLM-as-judge between the methods"),
          out: Optional[Path] = typer.Option(None, "--out", help="output folder (default ROOT/eval/<id>)"),
          data: Optional[str] = DataOpt) -> None:
    """Bulk evaluation: every question through every method (Ray, resumable), judged pairwise, reported."""
    from graphrag_ray.api import evaluate

    result = evaluate(root, config, questions, generate, [m.strip() for m in methods.split(",") if m.strip()],
                      judge, out, data, show_progress=sys.stderr.isatty())
    typer.echo(result.report.read_text(encoding="utf-8"))
    typer.echo(f"tables and charts in {result.out}")


@app.command("submission-id")
def submission_id_cmd(root: Path = RootOpt, config: Optional[Path] = ConfigOpt,
                      method: str = typer.Option("standard", help="index method")) -> None:
    """Print a deterministic Ray job submission id for this root's settings and input (no duplicate submits)."""
    from graphrag_ray.api import submission_id

    typer.echo(submission_id(root, config, method))


@app.command("simulate-llm")
def simulate_llm(
    host: str = typer.Option("127.0.0.1", help="address to bind (loopback unless told otherwise)"),
    port: int = typer.Option(8765, help="port (0: any free port)"),
    seed: int = typer.Option(0, help="seed of the deterministic faults"),
    latency: float = typer.Option(0.0, help="seconds added to every request"),
    latency_per_token: float = typer.Option(0.0, help="seconds added per completion token"),
    rpm: Optional[int] = typer.Option(None, help="server-side requests/min limit (429 beyond)"),
    tpm: Optional[int] = typer.Option(None, help="server-side tokens/min limit (429 beyond)"),
    api_key: Optional[str] = typer.Option(None, envvar="SIMULATOR_API_KEY",
                                          help="require this key (401 otherwise)"),
    models: Optional[str] = typer.Option(None, help="comma-separated known model names (404 for others)"),
    embedding_dim: int = typer.Option(256, help="embedding vector size"),
    fault_429: float = typer.Option(0.0, help="fraction of requests answered 429 + Retry-After"),
    fault_500: float = typer.Option(0.0, help="fraction answered 500"),
    fault_503: float = typer.Option(0.0, help="fraction answered 503"),
    fault_hang: float = typer.Option(0.0, help="fraction that hang past the client timeout"),
    fault_drop: float = typer.Option(0.0, help="fraction whose connection is dropped mid-answer"),
    fault_malformed: float = typer.Option(0.0, help="fraction answered with truncated/garbled content"),
    retry_after: float = typer.Option(0.05, help="Retry-After seconds announced with an injected 429"),
    hang_seconds: float = typer.Option(600.0, help="how long a hung request sleeps"),
    limits_after: Optional[str] = typer.Option(None, help="limits that change mid-run: 'SECONDS=RPM/TPM,...' "
                                               "(e.g. 60=75/7500; an empty side means no limit)"),
    answer_mode: str = typer.Option("normal", help="normal | no-delimiter | garbage (sloppy models)"),
    no_usage: bool = typer.Option(False, help="answer without usage figures (as llama.cpp's server streams)"),
    float_embeddings: bool = typer.Option(False, help="send embeddings as JSON floats even when base64 is "
                                          "asked for (servers that ignore encoding_format)"),
    stream_stall: float = typer.Option(0.0, help="seconds a streamed answer stalls after its first piece"),
    fail_containing: str = typer.Option("", help="chat requests holding this text always get a 500 "
                                        "(a permanent fault)"),
    refuse_containing: str = typer.Option("", help="chat requests holding this text always get a 400 that names "
                                          "no parameter (a fatal refusal)"),
    model_family: str = typer.Option("plain", help="plain | openai-reasoning | deepseek-reasoner | think-tags "
                                     "(how reasoning models' servers answer)"),
    answer_shape: str = typer.Option("clean", help="how answers are written: clean | closed-gt | "
                                     "strength-braces | numbered | numbered-one-line | bulleted | curly | "
                                     "broken-delimiter | prose-around | twice | fenced-json | prose-gleaning"),
    reasoning_tokens: int = typer.Option(200, help="about how many tokens a reasoning family thinks per request"),
    stream_rate: float = typer.Option(0.0, help="tokens per second generated, as a slow local server (0: at once)"),
    serial: bool = typer.Option(False, help="one answer at a time; an abandoned one is generated to its end"),
    busy_models: bool = typer.Option(False, help="GET /models waits while an answer is generated (llama.cpp)"),
) -> None:
    """Run the OpenAI-compatible simulator (for tests, benchmarks and rehearsals; costs nothing)."""
    from graphrag_ray.simulate.faults import FaultRates
    from graphrag_ray.simulate.server import SimulatorConfig, parse_limit_changes, serve

    faults = FaultRates(fault_429, fault_500, fault_503, fault_hang, fault_drop, fault_malformed, retry_after,
                        hang_seconds)
    config = SimulatorConfig(seed=seed, latency=latency, latency_per_token=latency_per_token, rpm=rpm, tpm=tpm,
                             api_key=api_key, models=[m for m in (models or "").split(",") if m],
                             embedding_dim=embedding_dim, faults=faults, answer_mode=answer_mode,
                             limits_after=parse_limit_changes(limits_after or ""), no_usage=no_usage,
                             stream_stall=stream_stall, fail_containing=fail_containing,
                             float_embeddings=float_embeddings, model_family=model_family,
                             answer_shape=answer_shape, reasoning_tokens=reasoning_tokens,
                             refuse_containing=refuse_containing, stream_rate=stream_rate, serial=serial,
                             busy_models=busy_models)
    serve(config, host, port)


@cache_app.command("clear")
def cache_clear(stage: str = typer.Option(..., "--stage", help="the stage whose answers go, e.g. extract_graph, "
                                          "summarize_descriptions, community_reports, query_global_map"),
                root: Path = RootOpt, config: Optional[Path] = ConfigOpt) -> None:
    """Drop one stage's cached answers, so the next run asks the model again for that stage only."""
    from graphrag_ray.api import clear_cache

    dropped, kept = clear_cache(root, config, stage)
    typer.echo(f"cache: dropped {dropped:,} answers of stage {stage}, kept {kept:,} of other stages"
               + ("" if dropped else " (answers cached before this version carry no stage and stay)"))


@tokenizers_app.command("install")
def tokenizers_install(dest: Optional[Path] = typer.Option(None, help="target folder"),
                       wheel: Optional[Path] = typer.Option(None, help="a litellm wheel already downloaded")) -> None:
    """Fetch cl100k_base and o200k_base (from the litellm wheel on PyPI) so token counting works offline."""
    from graphrag_ray.api import install_tokenizers

    for path in install_tokenizers(dest, wheel):
        typer.echo(f"tokenizer file ready: {path}")


def _prepare_argv(argv: list[str]) -> list[str]:
    """Accept --verbose anywhere on the line (users type it after the subcommand)."""
    flags = [a for a in argv if a in ("--verbose", "-v")]
    rest = [a for a in argv if a not in ("--verbose", "-v")]
    return flags[:1] + rest


def main(argv: list[str] | None = None) -> None:
    args = _prepare_argv(list(sys.argv[1:] if argv is None else argv))
    verbose = bool(args and args[0] in ("--verbose", "-v"))
    try:
        code = app(args=args, standalone_mode=False, prog_name="graphrag-ray")
        if code == 130:  # typer turns Ctrl-C into a returned 130 (when not standalone)
            _fail("interrupted", 130, False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except GraphRagRayError as exc:
        _fail(redact(str(exc)), exc.exit_code, verbose)
    except typer.Abort:
        _fail("aborted", 130, False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # typer's own click: usage errors (exit 2), Abort, Exit
        if type(exc).__name__ == "Exit":
            sys.exit(getattr(exc, "exit_code", 0))
        if type(exc).__name__ == "Abort":
            _fail("aborted", 130, False)
        code = getattr(exc, "exit_code", 2)
        hint = f" (see graphrag-ray {_subcommand(args)}--help)" if code == 2 else ""
        _fail(redact(exc.format_message()) + hint, code, verbose)
    except KeyboardInterrupt:
        _fail("interrupted", 130, False)
    except Exception as exc:  # an engine bug: still one line unless --verbose
        _fail(f"unexpected {type(exc).__name__}: {redact(str(exc))} (run with --verbose for the traceback)", 1,
              verbose)


def _subcommand(args: list[str]) -> str:
    names = [a for a in args if not a.startswith("-")][:1]
    return f"{names[0]} " if names and names[0] in {c.name or c.callback.__name__ for c in app.registered_commands} else ""


def _fail(message: str, code: int, verbose: bool) -> None:
    if verbose:
        sys.stderr.write(redact(traceback.format_exc()))
    sys.stderr.write(f"error: {message}\n")
    sys.exit(code)


def command() -> None:
    """The installed `graphrag-ray` command: main(), then a prompt exit (see exit_now)."""
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    exit_now(code)


def exit_now(code: int | str | None) -> None:
    """Leave without the interpreter's teardown, which spends a noticeable part of a short command freeing the openai / pydantic / LanceDB
    objects one by one - a sixth of a query command. Everything a normal exit does that matters runs first:
    other threads are joined, atexit handlers run (Ray's shutdown, logging, temporary folders), stdio is
    flushed. Only for the command itself: main() stays safe to call in-process."""
    import atexit
    import os
    import threading

    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (| head) or stream: nothing more can be written anyway
            pass
    os._exit(code or 0)


if __name__ == "__main__":
    command()
