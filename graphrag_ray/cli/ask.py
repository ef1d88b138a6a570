"""Commands that read an index: query, chat, eval, export, view, report."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import typer

from graphrag_ray.cli import CacheOpt, ConfigOpt, DataOpt, RootOpt, _overrides, app
from graphrag_ray.cli.terminal import LineReader, asyncio_handles_ctrl_c, printable, write_out
from graphrag_ray.errors import GraphRagRayError

LevelOpt = typer.Option(
    None, "--level", help="community level whose communities colour / label the graph (default: 0, the broadest)"
)


@app.command()
def export(
    root: Path = RootOpt,
    config: Path | None = ConfigOpt,
    data: str | None = DataOpt,
    fmt: str = typer.Option("graphml", "--format", "-f", help="graphml | gexf | csv | neo4j"),
    level: int | None = LevelOpt,
    out: Path | None = typer.Option(None, "--out", "-o", help="folder (default: ROOT/export/FORMAT)"),
) -> None:
    """Write the graph for other tools: GraphML / GEXF (Gephi, Cytoscape, networkx), CSV, or Neo4j's import CSV."""
    from graphrag_ray.api import export_graph

    written = export_graph(root, fmt, out, level, config, data)
    for path in written:
        typer.echo(str(path))
    if fmt == "neo4j":
        typer.echo(f"load into a stopped Neo4j 5 from NEO4J_HOME with: bash {shlex.quote(str(written[-1]))}")


@app.command()
def view(
    root: Path = RootOpt,
    config: Path | None = ConfigOpt,
    data: str | None = DataOpt,
    level: int | None = LevelOpt,
    max_nodes: int = typer.Option(
        1500, "--max-nodes", help="entities drawn (the top ones by degree; all are searchable)"
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="HTML file (default: ROOT/graph.html)"),
) -> None:
    """One self-contained HTML file showing the graph by community: search, descriptions, relationships, reports."""
    from graphrag_ray.api import write_graph_view

    typer.echo(str(write_graph_view(root, out, level, max_nodes, config, data)))


@app.command()
def report(
    root: Path = RootOpt,
    config: Path | None = ConfigOpt,
    data: str | None = DataOpt,
    out: Path | None = typer.Option(None, "--out", "-o", help="folder (default: ROOT/report)"),
) -> None:
    """A Markdown + PNG report of the index: tables, entity types, degrees, communities, cost per step, failures."""
    from graphrag_ray.api import write_index_report

    typer.echo(str(write_index_report(root, out, config, data)))


def _question_text(question: str | None, query_opt: str | None, query_file: Path | None) -> str:
    given = [
        name
        for name, value in (("QUESTION", question), ("--query", query_opt), ("--query-file", query_file))
        if value is not None
    ]
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
def query(
    question: str | None = typer.Argument(None, help="the question (or use --query)"),
    query_opt: str | None = typer.Option(None, "--query", "-q", help="the question"),
    query_file: Path | None = typer.Option(
        None, "--query-file", help="read the question from a file ('-': standard input), for long questions"
    ),
    method: str = typer.Option(
        "local",
        "--method",
        "-m",
        help="local | global | drift | basic | hybrid | auto (or contextual); a wrong name lists every method",
    ),
    roots: list[Path] = typer.Option(
        [Path(".")],
        "--root",
        "-r",
        help="project root; give it twice or more to ask several indexes at "
        "once (global or local search; ids cited as <index>:<id>)",
    ),
    config: Path | None = ConfigOpt,
    data: str | None = DataOpt,
    community_level: int | None = typer.Option(
        None, "--community-level", help="Leiden level of the reports (default 2)"
    ),
    dynamic_community_selection: bool = typer.Option(
        False,
        "--dynamic-community-selection/--no-dynamic-community-selection",
        help="global search rates reports from the root down",
    ),
    response_type: str | None = typer.Option(
        None, "--response-type", help="e.g. 'Multiple Paragraphs', 'Single Sentence'"
    ),
    streaming: bool = typer.Option(False, "--streaming/--no-streaming", help="print the answer as it comes"),
    context_only: bool = typer.Option(False, "--context-only", help="print the context; no answer call"),
    no_llm: bool = typer.Option(
        False,
        "--no-llm",
        help="answer with evidence sentences; no LLM call (automatic when the chat model has no API key)",
    ),
    cache: bool = CacheOpt,
) -> None:
    """Ask the index a question (QUESTION '-' reads it from standard input)."""
    overrides = _overrides(cache)
    text = _question_text(question, query_opt, query_file)
    from graphrag_ray import api

    method = api.check_question(text, method, community_level)  # before the index loads
    root = roots if len(roots) > 1 else roots[0]
    # what both ways of asking are given first (api.search and api.search_streaming's order)
    asked = (text, method, root, config, data, community_level, dynamic_community_selection, response_type)
    if streaming and not context_only:
        finished = []

        async def stream():
            shown = False
            try:
                async for piece in api.search_streaming(
                    *asked, no_llm=no_llm, on_result=finished.append, overrides=overrides
                ):
                    sys.stdout.write(printable(piece))
                    sys.stdout.flush()
                    shown = shown or bool(piece)
            finally:  # a stream cut mid-answer: its error goes on a line of its own
                if shown:
                    sys.stdout.write("\n")
                    sys.stdout.flush()

        with asyncio_handles_ctrl_c():
            asyncio.run(stream())
        result = finished[0]
        if "route" in result.details:
            sys.stderr.write(printable(f"route: {result.details['route']} ({result.details['route_reason']})") + "\n")
    else:
        with asyncio_handles_ctrl_c():
            result = asyncio.run(api.search(*asked, context_only=context_only, no_llm=no_llm, overrides=overrides))
        if "route" in result.details:
            write_out(f"route: {result.details['route']} ({result.details['route_reason']})")
        write_out(result.context_text if context_only else result.response)
    sys.stderr.write(printable(result.usage_line()) + "\n")


@app.command()
def chat(
    root: Path = RootOpt,
    config: Path | None = ConfigOpt,
    data: str | None = DataOpt,
    questions: int = typer.Option(3, help="follow-up questions suggested after each answer"),
    response_type: str = typer.Option("Single Paragraph", "--response-type"),
    no_llm: bool = typer.Option(False, "--no-llm", help="extractive answers and follow-ups; no LLM call"),
) -> None:
    """A conversation with the index: local search, streaming, history and numbered follow-ups."""
    from graphrag_ray.api import chat as chat_loop

    with asyncio_handles_ctrl_c():  # the prompt is read by the event loop: Ctrl-C there leaves at once
        chat_loop(
            root,
            config,
            data,
            question_count=questions,
            response_type=response_type,
            no_llm=no_llm,
            read=LineReader(),
            write=write_out,
        )


@app.command("eval")
def eval_(
    root: Path = RootOpt,
    config: Path | None = ConfigOpt,
    questions: Path | None = typer.Option(
        None, "--questions", help="csv/jsonl: question, id, gold_answer, gold_evidence (text-unit ids)"
    ),
    generate: int | None = typer.Option(None, "--generate", help="make N questions from the index"),
    methods: str = typer.Option(
        "local,global",
        help="comma-separated: local, global, drift, basic, hybrid, evidence (the no-LLM baseline); a wrong name lists "
        "every method",
    ),
    judge: bool = typer.Option(True, "--judge/--no-judge", help="pairwise LLM-as-judge between the methods"),
    out: Path | None = typer.Option(None, "--out", help="output folder (default ROOT/eval/<id>)"),
    data: str | None = DataOpt,
) -> None:
    """Bulk evaluation: every question through every method (Ray, resumable), judged pairwise, reported."""
    from graphrag_ray.api import evaluate

    result = evaluate(
        root,
        config,
        questions,
        generate,
        [m.strip() for m in methods.split(",") if m.strip()],
        judge,
        out,
        data,
        show_progress=sys.stderr.isatty(),
    )
    typer.echo(result.report.read_text(encoding="utf-8"))
    typer.echo(f"tables and charts in {result.out}")


@app.command()
def serve(
    ctx: typer.Context,
    roots: list[Path] = typer.Option(
        ...,
        "--root",
        "-r",
        help="a project root to serve; give it once per index (each is named by serve.name or its folder's name)",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="address to bind (loopback unless told otherwise)"),
    port: int = typer.Option(8000, "--port", help="port"),
    request_log: Path | None = typer.Option(
        None, "--request-log", help="append one JSON line per request to this file (also on Ray Serve's log)"
    ),
    proxy_location: str = typer.Option(
        "HeadOnly", "--proxy-location", help="HeadOnly (one address) or EveryNode (a proxy on every node)"
    ),
    address: str | None = typer.Option(
        None,
        "--address",
        help="the Ray cluster to serve on (HOST:PORT; or RAY_ADDRESS); by default a cluster of its own, on loopback",
    ),
) -> None:
    """Serve indexes over HTTP on Ray Serve: OpenAI's /v1/chat/completions and /v1/models, Ollama's /api/chat,
    /api/generate and /api/tags, retrieval-only /v1/context, /health. The model name picks the index and the
    method: <index>/local, <index>/global, ..., all/global (every index at once)."""
    try:
        from graphrag_ray.serve.deploy import run_server
    except ImportError as exc:
        raise GraphRagRayError(f"serve needs Ray Serve: pip install 'graphrag-ray[serve]' ({exc})") from None
    from graphrag_ray.cli import verbose

    run_server(
        [str(r) for r in roots],
        host,
        port,
        str(request_log.resolve()) if request_log else None,
        verbose=verbose(ctx),
        say=lambda line: sys.stderr.write(line + "\n"),
        proxy_location=proxy_location,
        address=address,
    )
