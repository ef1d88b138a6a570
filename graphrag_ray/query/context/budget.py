"""Token packing and the `-----Name-----` pipe tables GraphRAG users know."""

from __future__ import annotations

from typing import Any, Callable


def cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "/")


def table_header(name: str, columns: list[str]) -> str:
    return f"-----{name}-----\n" + "|".join(columns) + "\n"


def pack_table(
    name: str, columns: list[str], rows: list[list[Any]], count: Callable[[str], int], budget: int
) -> tuple[str, int]:
    """Rows in order until the budget is spent; returns (text, rows kept). Nothing when not even the header fits."""
    text = table_header(name, columns)
    used = count(text)
    if used > budget:
        return "", 0
    kept = 0
    for row in rows:
        line = "|".join(cell(v) for v in row) + "\n"
        cost = count(line)
        if used + cost > budget:
            break
        text += line
        used += cost
        kept += 1
    return (text if kept else ""), kept


def cite(ids: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (", +more" if len(ids) > limit else "")
