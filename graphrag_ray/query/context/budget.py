"""Token packing and the `-----Name-----` pipe tables GraphRAG users know."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


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


def pack_batches(
    name: str,
    columns: list[str],
    rows: list[list[Any]],
    count: Callable[[str], int],
    budget: int,
    alone: Callable[[list[Any]], list[Any]] | None = None,
) -> list[tuple[str, int, int]]:
    """Rows in order cut into tables of at most `budget` tokens each, every row's line counted once: [(text, start,
    end)], the rows[start:end] of each. A row over the budget by itself is a table of its own, shown as `alone`
    makes it (a report's title without its summary) or as it is."""
    header = table_header(name, columns)
    base = count(header)
    batches: list[tuple[str, int, int]] = []
    lines: list[str] = []
    used, start = base, 0
    for i, row in enumerate(rows):
        line = "|".join(cell(v) for v in row) + "\n"
        cost = count(line)
        if lines and used + cost > budget:
            batches.append((header + "".join(lines), start, i))
            lines, used, start = [], base, i
        if not lines and used + cost > budget:  # too large alone: a table of its own
            shown = alone(row) if alone is not None else row
            batches.append((header + "|".join(cell(v) for v in shown) + "\n", i, i + 1))
            start = i + 1
            continue
        lines.append(line)
        used += cost
    if lines:
        batches.append((header + "".join(lines), start, len(rows)))
    return batches


def cite(ids: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (", +more" if len(ids) > limit else "")


def sources_table(units: list[dict]) -> tuple[list[str], list[list]]:
    """A Sources table's columns and rows: `id|text`, as Microsoft GraphRAG's; with `source` between them when a
    unit has a place in its file (`report.pdf p. 12`: PDF, Office and Markdown documents)."""
    if any(u.get("location") for u in units):
        return ["id", "source", "text"], [[u["human_readable_id"], u.get("location") or "", u["text"]] for u in units]
    return ["id", "text"], [[u["human_readable_id"], u["text"]] for u in units]


def source_records(units: list[dict]) -> list[dict]:
    """The Sources rows a result lists (its `records`), with their place in the file where there is one."""
    return [
        {"id": u["human_readable_id"], **({"source": u["location"]} if u.get("location") else {}), "text": u["text"]}
        for u in units
    ]
