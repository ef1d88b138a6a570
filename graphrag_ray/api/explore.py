"""Looking at an index and judging it: bulk evaluation, graph export, the graph view and the report."""

from __future__ import annotations

from pathlib import Path

from graphrag_ray.config.load import load_settings
from graphrag_ray.errors import ConfigError, UsageError
from graphrag_ray.storage.location import as_location, resolve


def evaluate(
    root: str | Path = ".",
    config_file: str | Path | None = None,
    questions_file: str | Path | None = None,
    generate: int | None = None,
    methods: list[str] | None = None,
    judge: bool = True,
    out: str | Path | None = None,
    data: str | Path | None = None,
    show_progress: bool = False,
):
    """Bulk evaluation: every question through every method, judged pairwise, reported (resumable)."""
    from graphrag_ray.eval.run import run_eval

    return run_eval(root, config_file, questions_file, generate, methods, judge, out, data, show_progress)


def _graph(root: str | Path, config_file: str | Path | None, data: str | Path | None):
    from graphrag_ray.explore.graph import load_graph

    if data:
        return load_graph(as_location(data), given=True)
    root = Path(root).resolve()  # the graph is named after the project folder
    return load_graph(resolve(root, load_settings(root, config_file).output.base_dir))


def export_graph(
    root: str | Path = ".",
    fmt: str = "graphml",
    out: str | Path | None = None,
    level: int | None = None,
    config_file: str | Path | None = None,
    data: str | Path | None = None,
) -> list[Path]:
    """The published index's graph (or the version at `data`) as graphml | gexf | csv | neo4j files in `out`
    (default ROOT/export/FORMAT); the files written."""
    from graphrag_ray.explore.export import check_format
    from graphrag_ray.explore.export import export_graph as write

    check_format(fmt)  # before the index loads
    folder = (Path(out) if out else Path(root) / "export" / fmt).resolve()  # import.sh runs from NEO4J_HOME
    graph = _graph(root, config_file, data)
    try:
        return write(graph, fmt, folder, level)
    except OSError as exc:  # a folder that cannot be made or written: the user's to fix, said in one line
        raise UsageError(f"export --out {folder}: cannot write there ({exc.strerror or exc})") from None


def write_graph_view(
    root: str | Path = ".",
    out: str | Path | None = None,
    level: int | None = None,
    max_nodes: int = 1500,
    config_file: str | Path | None = None,
    data: str | Path | None = None,
) -> Path:
    """One self-contained HTML file (default ROOT/graph.html) showing the graph coloured by community."""
    from graphrag_ray.explore.view import write_view

    if max_nodes < 1:
        raise ConfigError(f"max_nodes (--max-nodes) must be at least 1, not {max_nodes}")
    return write_view(
        _graph(root, config_file, data), Path(out) if out else Path(root) / "graph.html", level, max_nodes
    )


def write_index_report(
    root: str | Path = ".",
    out: str | Path | None = None,
    config_file: str | Path | None = None,
    data: str | Path | None = None,
) -> Path:
    """report.md with PNG charts (default in ROOT/report/): tables, types, degrees, communities, cost per step,
    failures, and the kept versions' changes."""
    from graphrag_ray.explore.report import write_index_report as write
    from graphrag_ray.storage.tables import published_versions

    graph = _graph(root, config_file, data)
    versions = [] if data else published_versions(resolve(root, load_settings(root, config_file).output.base_dir))
    return write(graph, Path(out) if out else Path(root) / "report", versions)
