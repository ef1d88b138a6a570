"""Read `-----Name-----` context tables back (pipe tables whose cells may span lines, or CSV): the extractive
(no-LLM) answerer reads the context it built, and the simulator reads the contexts it is sent."""

from __future__ import annotations

import csv
import io
import re


def parse_context_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Parse `-----Name-----` sections of a context: CSV (report contexts) or pipe tables (query contexts,
    whose cells may span lines: a record starts at a line beginning with `<id>|`)."""
    tables: dict[str, list[dict[str, str]]] = {}
    for match in re.finditer(r"-----(\w[\w ]*)-----\n(.*?)(?=\n-----\w|\Z)", text, re.S):
        block = match.group(2).strip("\n")
        if not block.strip():
            continue
        lines = block.split("\n")
        header = lines[0]
        if header.count("|") >= header.count(",") and "|" in header:
            columns = header.split("|")
            records: list[str] = []
            for line in lines[1:]:
                if re.match(r"^[^|\n]{1,40}\|", line) and (
                    not records or line.split("|", 1)[0].strip().isdigit() or columns[0] != "id"
                ):
                    records.append(line)
                elif records:
                    records[-1] += "\n" + line
            rows = []
            for record in records:
                cells = record.split("|")
                if len(cells) > len(columns):  # stray pipes end up in the widest (text) column
                    widest = max(range(len(columns)), key=lambda i: columns[i] in ("text", "content", "description"))
                    extra = len(cells) - len(columns)
                    cells = (
                        cells[:widest] + ["|".join(cells[widest : widest + extra + 1])] + cells[widest + extra + 1 :]
                    )
                rows.append({c: (cells[i] if i < len(cells) else "") for i, c in enumerate(columns)})
        else:
            rows = [{k: v or "" for k, v in row.items() if k is not None} for row in csv.DictReader(io.StringIO(block))]
        tables[match.group(1).strip().lower()] = rows
    return tables
