"""The evaluation report: markdown summary plus PNG charts, next to the Parquet tables."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from graphrag_ray.explore.markdown import markdown_table


def per_method(answers: pl.DataFrame, gold: pl.DataFrame) -> pl.DataFrame:
    summary = answers.group_by("method").agg(
        pl.len().alias("answers"),
        pl.col("error").is_not_null().sum().alias("errors"),
        pl.col("latency_s").median().alias("latency_p50_s"),
        pl.col("latency_s").quantile(0.95).alias("latency_p95_s"),
        pl.col("llm_calls").mean().alias("calls_per_answer"),
        pl.col("cost").sum().alias("cost_usd"),
    )
    if gold.height:
        scores = gold.group_by("method").agg(
            pl.col("exact_match").cast(pl.Float64).mean().alias("exact_match"),
            pl.col("fuzzy_match").cast(pl.Float64).mean().alias("fuzzy_match"),
            pl.col("evidence_recall").mean().alias("evidence_recall"),
        )
        summary = summary.join(scores, on="method", how="left")
    return summary.sort("method")


def charts(out: Path, methods_summary: pl.DataFrame, rates: pl.DataFrame) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    if rates.height:
        pairs = rates.select("method_a", "method_b").unique(maintain_order=True).rows()
        criteria = rates["criterion"].unique(maintain_order=True).to_list()
        fig, ax = plt.subplots(figsize=(2 + 1.6 * len(criteria) * max(1, len(pairs)) / 2, 4))
        width = 0.8 / max(1, len(pairs))
        for i, (a, b) in enumerate(pairs):
            sub = rates.filter((pl.col("method_a") == a) & (pl.col("method_b") == b))
            x = [criteria.index(c) + i * width for c in sub["criterion"].to_list()]
            y = sub["win_rate"].to_list()
            err = [
                [m - lo for m, lo in zip(y, sub["ci_low"].to_list())],
                [hi - m for m, hi in zip(y, sub["ci_high"].to_list())],
            ]
            ax.bar(x, y, width, yerr=err, capsize=3, label=f"{a} vs {b}")
        ax.axhline(0.5, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xticks([i + width * (len(pairs) - 1) / 2 for i in range(len(criteria))], criteria)
        ax.set_ylim(0, 1)
        ax.set_ylabel("win rate of the first method (95% CI)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "win_rates.png", dpi=110)
        plt.close(fig)
        written.append(out / "win_rates.png")
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    methods = methods_summary["method"].to_list()
    left.bar(methods, methods_summary["cost_usd"].to_list(), color="#4c72b0")
    left.set_title("cost (USD, all answers)")
    right.bar(methods, methods_summary["latency_p50_s"].to_list(), color="#dd8452")
    right.set_title("latency p50 (s)")
    for ax in (left, right):
        ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(out / "cost_latency.png", dpi=110)
    plt.close(fig)
    written.append(out / "cost_latency.png")
    return written


def _with_na(summary: pl.DataFrame) -> pl.DataFrame:
    """Scores that could not be measured for a method (evidence recall of global search's reports) shown as n/a."""
    if "evidence_recall" not in summary.columns:
        return summary
    return summary.with_columns(
        pl.col("evidence_recall").map_elements(lambda v: f"{v:.3f}", return_dtype=pl.String).fill_null("n/a")
    )


def write_report(
    out: Path, questions: pl.DataFrame, answers: pl.DataFrame, gold: pl.DataFrame, rates: pl.DataFrame
) -> Path:
    summary = per_method(answers, gold)
    images = charts(out, summary, rates)
    parts = [
        "# Evaluation report",
        "",
        f"{questions.height} questions × {answers['method'].n_unique()} methods = {answers.height} answers "
        f"({int(answers['error'].is_not_null().sum())} errors).",
        "",
        "## Per method",
        "",
        markdown_table(_with_na(summary)),
    ]
    if rates.height:
        parts += ["", "## Pairwise win rates (LLM judge, both orders, ties = 0.5, 95% CI)", "", markdown_table(rates)]
    parts += [""] + [f"![{p.stem}]({p.name})" for p in images]
    path = out / "report.md"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path
