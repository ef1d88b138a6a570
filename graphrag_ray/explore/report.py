"""`graphrag-ray report`: what an index holds and what it cost, as Markdown with PNG charts — rows per table,
entity types, the degree distribution, community sizes per level, calls / tokens / cost / wall per step, failures by
reason, and what each kept version changed."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from graphrag_ray.explore.graph import IndexGraph
from graphrag_ray.explore.markdown import inert, markdown_table
from graphrag_ray.storage.schemas import REQUIRED_TABLES
from graphrag_ray.storage.tables import read_table

TOP_TYPES = 15
TOP_ROWS = 10
CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "Source Han Sans SC",
    "Microsoft YaHei",
    "PingFang SC",
    "SimHei",
)


def step_rows(stats: dict) -> pl.DataFrame:
    """One row per step of the run that built the version: wall, items, failures, and its LLM use."""
    rows = []
    for name, step in (stats.get("steps") or {}).items():
        total = (step.get("ledger") or {}).get("total") or {}
        rows.append(
            {
                "step": name,
                "wall_s": float(step.get("wall_s") or 0.0),
                "items": step.get("items"),
                "failures": int(step.get("failures") or 0),
                "calls": int(total.get("calls", 0)),
                "cache_hits": int(total.get("cache_hits", 0)),
                "prompt_tokens": int(total.get("prompt_tokens", 0)),
                "cached_tokens": int(total.get("cached_tokens", 0)),
                "completion_tokens": int(total.get("completion_tokens", 0)),
                "cost_usd": float(total.get("cost", 0.0)),
            }
        )
    schema = {
        "step": pl.String,
        "wall_s": pl.Float64,
        "items": pl.Int64,
        "failures": pl.Int64,
        "calls": pl.Int64,
        "cache_hits": pl.Int64,
        "prompt_tokens": pl.Int64,
        "cached_tokens": pl.Int64,
        "completion_tokens": pl.Int64,
        "cost_usd": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def version_rows(versions: list[dict]) -> pl.DataFrame:
    rows = []
    for v in reversed(versions):  # oldest first: the order changes happened in
        changes = v.get("changes") or {}
        row = {
            "version": v["version"] + (" (published)" if v.get("current") else ""),
            "kind": v.get("kind", "index"),
            "entities": int((v.get("rows") or {}).get("entities", 0)),
            "calls": int((v.get("total") or {}).get("calls", 0)),
        }
        for table in ("documents", "entities", "community_reports"):
            d = changes.get(table) or {}
            row[f"{table} +/~/-"] = f"+{d.get('added', 0)} ~{d.get('changed', 0)} -{d.get('removed', 0)}" if d else ""
        rows.append(row)
    return pl.DataFrame(rows)


def _charts(out: Path, graph: IndexGraph, steps: pl.DataFrame) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    # Entity types and titles may be Chinese: fall back to a CJK font when one is installed.
    installed = {f.name for f in font_manager.fontManager.ttflist}
    plt.rcParams["font.family"] = ["DejaVu Sans"] + [f for f in CJK_FONTS if f in installed]
    written = []

    def save(fig, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(out / name)

    types = (
        graph.nodes.group_by(pl.col("type").fill_null("(none)"))
        .len()
        .sort(["len", "type"], descending=[True, False])
        .head(TOP_TYPES)
    )
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.32 * max(types.height, 1)))
    ax.barh(types["type"].to_list()[::-1], types["len"].to_list()[::-1], color="#4e79a7")
    ax.set_xlabel("entities")
    ax.set_title(f"Entity types (top {min(TOP_TYPES, types.height)} of {graph.nodes['type'].n_unique()})")
    save(fig, "entity_types.png")

    degree = graph.nodes["degree"].fill_null(0)
    fig, ax = plt.subplots(figsize=(7, 4))
    counts = degree.filter(degree > 0).value_counts().sort("degree")  # a log axis has no 0: isolated are counted
    ax.loglog(counts["degree"].to_list(), counts["count"].to_list(), "o", markersize=4, color="#e15759")
    ax.set_xlabel("degree (relationships per entity, log scale)")
    ax.set_ylabel("entities with that degree (log scale)")
    isolated = int((degree == 0).sum())
    ax.set_title(
        f"Degree distribution ({degree.len():,} entities, median degree {degree.median() or 0:g}"
        + (f", {isolated:,} isolated" if isolated else "")
        + ")"
    )
    ax.grid(True, which="major", alpha=0.3)
    plain_log_ticks(ax.xaxis, ax.yaxis)
    save(fig, "degree_distribution.png")

    fig, ax = plt.subplots(figsize=(7, 4))
    sizes = [graph.communities.filter(pl.col("level") == lv)["size"].to_list() for lv in graph.levels]
    if any(sizes):
        ax.boxplot(sizes, tick_labels=[f"{lv}\n({len(s)} comm.)" for lv, s in zip(graph.levels, sizes)])
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
    ax.set_xlabel("community level (0 = broadest)")
    ax.set_ylabel("entities per community (log scale)")
    ax.set_title("Community sizes per level")
    ax.grid(True, axis="y", alpha=0.3)
    save(fig, "community_sizes.png")

    if steps.height:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.9 + 0.36 * steps.height))
        names = steps["step"].to_list()[::-1]
        bars = left.barh(names, steps["wall_s"].to_list()[::-1], color="#59a14f")
        left.bar_label(bars, fmt="%.1f", padding=2, fontsize=8)
        left.set_xlabel("wall time (s)")
        left.set_title("Wall time per step")
        right.barh(names, steps["calls"].to_list()[::-1], color="#f28e2b", label="LLM calls")
        bars = right.barh(
            names,
            steps["cache_hits"].to_list()[::-1],
            left=steps["calls"].to_list()[::-1],
            color="#ffbe7d",
            label="answered from the cache",
        )
        right.bar_label(
            bars,
            labels=[
                f"{c:,} + {h:,}" if c or h else ""
                for c, h in zip(steps["calls"].to_list()[::-1], steps["cache_hits"].to_list()[::-1])
            ],
            padding=2,
            fontsize=8,
        )
        for ax in (left, right):
            ax.margins(x=0.15)  # room for the labels
        right.set_xlabel("requests")
        right.set_title("LLM requests per step (calls + from the cache)")
        right.legend(fontsize=8, loc="lower right")
        right.set_yticks(range(len(names)), [""] * len(names))
        save(fig, "steps.png")
    return written


def write_index_report(graph: IndexGraph, out: Path, versions: list[dict]) -> Path:
    """report.md and its PNGs in `out`, for the version `graph` was read from."""
    out.mkdir(parents=True, exist_ok=True)
    stats = json.loads(graph.folder.read_bytes("stats.json") or b"{}")
    steps = step_rows(stats)
    failures = read_table(graph.folder, "failures")
    rows = {name: (stats.get("rows") or {}).get(name) for name in REQUIRED_TABLES}
    for name, count in rows.items():
        if count is None:  # an index copied from elsewhere has no stats.json: count the table
            df = read_table(graph.folder, name)
            rows[name] = df.height if df is not None else 0
    ours = "total" in stats  # published by graphrag-ray's run (else: Microsoft GraphRAG's, or copied by hand)
    parts = [f"# Index report: {inert(graph.name)}", "", _made_by(stats, graph.folder), ""]
    parts += [
        "## Rows per table",
        "",
        markdown_table(pl.DataFrame({"table": list(rows), "rows": [int(v) for v in rows.values()]})),
        "",
        "## Graph",
        "",
        f"{graph.nodes.height:,} entities, {graph.edges.height:,} relationships, "
        f"{graph.communities.height:,} communities on {len(graph.levels)} level"
        f"{'' if len(graph.levels) == 1 else 's'}.",
        "",
        "![entity types](entity_types.png)",
        "",
        "![degree distribution](degree_distribution.png)",
        "",
        "![community sizes](community_sizes.png)",
        "",
        f"Best-connected entities (top {TOP_ROWS}):",
        "",
        markdown_table(
            graph.nodes.sort(["degree", "title"], descending=[True, False])
            .head(TOP_ROWS)
            .select("title", "type", "degree", "frequency")
        ),
        "",
    ]
    if graph.levels:
        largest = (
            graph.communities.filter(pl.col("level") == graph.levels[0])
            .join(
                graph.reports.select("community", pl.col("title").alias("report"), "rank"), on="community", how="left"
            )
            .sort(["size", "community"], descending=[True, False])
            .head(TOP_ROWS)
            .select("community", "size", "report", "rank")
        )
        parts += [
            f"Largest communities at level {graph.levels[0]} (entities; report title and rank):",
            "",
            markdown_table(largest),
            "",
        ]
    parts += ["## Steps", ""]
    parts += (
        [markdown_table(steps), "", "![steps](steps.png)"]
        if steps.height
        else ["No stats.json: this index was not published by graphrag-ray's run, so per-step figures are unknown."]
    )
    parts += ["", "## Failures", ""]
    if failures is not None and failures.height:
        by_reason = (
            failures.with_columns(pl.col("reason").str.slice(0, 120))
            .group_by("step", "reason")
            .len()
            .sort(["len", "step"], descending=[True, False])
        )
        parts += [
            f"{failures.height:,} items failed (listed in failures.parquet):",
            "",
            markdown_table(by_reason.rename({"len": "items"})),
        ]
    elif ours:
        parts += ["None: every item of every step succeeded."]
    ended = sum((step.get("events") or {}).get("gleanings_unusable", 0) for step in (stats.get("steps") or {}).values())
    if ended:
        parts += [
            "",
            f"{ended:,} gleaning rounds ended on an answer unusable twice (both paid; the usage ledger counts them "
            "as failed calls): their items kept what the first answers found.",
        ]
    else:
        parts += ["Not recorded: this index's writer keeps no list of the items that failed."]
    if versions:
        parts += [
            "",
            "## Versions (oldest first; +added ~changed -removed)",
            "",
            markdown_table(version_rows(versions)),
        ]
    _charts(out, graph, steps)
    path = out / "report.md"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


def _made_by(stats: dict, folder) -> str:
    """The report's first line: how the index was built - what graphrag-ray's run recorded, or what is known of an
    index another tool wrote (Microsoft GraphRAG records no calls, tokens, cost or failures)."""
    total = stats.get("total")
    if total is not None:
        return (
            f"Method **{stats.get('method', 'not recorded')}**, built by `{stats.get('kind', 'index')}` in "
            f"{stats.get('wall_s', 0):,.1f} s: {total.get('calls', 0):,} LLM calls "
            f"(+{total.get('cache_hits', 0):,} from the cache), {total.get('prompt_tokens', 0):,} prompt "
            f"({total.get('cached_tokens', 0):,} of them served from the provider's prompt cache) + "
            f"{total.get('completion_tokens', 0):,} completion tokens, ${total.get('cost', 0):.4f}"
            + (f"; {total['batch_calls']:,} calls by the Batch API." if total.get("batch_calls") else ".")
        )
    from graphrag_ray.storage.msgraphrag_layout import version_found

    version = version_found(folder)
    if "workflows" in stats or version != "unknown":
        runtime = f", its run took {stats['total_runtime']:,.1f} s" if "total_runtime" in stats else ""
        return (
            f"An index written by **Microsoft GraphRAG {version}** ({stats.get('num_documents', '?')} documents"
            f"{runtime}). Its writer records no model calls, tokens, cost or failed items: none are shown."
        )
    return "An index with no stats.json (copied by hand?): how it was built is not recorded."


def plain_log_ticks(*axes) -> None:
    """Log axes labelled 9, 16, 200 - not 9×10^0, 1.6×10^1 (matplotlib's labels on a range under a decade);
    minor ticks are labelled only on such short ranges (LogFormatter's thresholds), not on every decade."""
    from matplotlib.ticker import FuncFormatter, LogFormatter

    for axis in axes:
        axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
