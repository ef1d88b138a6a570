"""Markdown tables for the reports people read (index report, evaluation report)."""

from __future__ import annotations

import html

import polars as pl


def inert(text: str) -> str:
    """Text from the data (an entity's name, a model's words) as Markdown that renders it as text: HTML's special
    characters escaped (a `<script>` or a `<!--` in a name stays visible and inert), table pipes escaped, one line."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def markdown_table(df: pl.DataFrame) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 1000 else f"{v:,.0f}"
        if isinstance(v, int) and not isinstance(v, bool):
            return f"{v:,}"
        return "" if v is None else inert(str(v))

    lines = ["| " + " | ".join(inert(c) for c in df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join(lines)
