"""Markdown tables for the reports people read (index report, evaluation report)."""

from __future__ import annotations

import html
import re

import polars as pl

# Markdown's active characters in running text: links and images open with `[` or `![` (escaped, no `(...)` after
# them is a target), emphasis and code (`*`, `_`, `` ` ``), table cells (`|`) and the escape itself; `<` and `&`
# are HTML-escaped. A backslash before ASCII punctuation is a plain character in CommonMark, GitHub's Markdown and
# python-markdown alike.
_MARKDOWN_ACTIVE = re.compile(r"([\\`*_\[\]!|])")


def inert(text: str) -> str:
    """Text from the data (an entity's name, a model's words) as Markdown that renders it as text: HTML's special
    characters escaped (a `<script>`, a `<!--` or an `<http://…>` autolink stays visible and inert), Markdown's
    active characters escaped (`[click](javascript:…)` and `![pixel](http://…)` are no link and no image), one line.
    A model copies such text from a hostile document."""
    one_line = text.replace("\r", " ").replace("\n", " ")
    return _MARKDOWN_ACTIVE.sub(r"\\\1", html.escape(one_line, quote=False))


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
