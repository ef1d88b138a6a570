"""Evaluation questions: from a file (csv / jsonl) or generated from the index (global ones from community
reports, local ones from entities, as the question-generation module frames them)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from graphrag_ray.errors import InputError
from graphrag_ray.ids import content_id
from graphrag_ray.query.index_data import IndexData

QUESTION_SCHEMA = {
    "question_id": pl.String,
    "question": pl.String,
    "kind": pl.String,
    "gold_answer": pl.String,
    "gold_evidence": pl.List(pl.String),
}


def load_questions(path: str | Path) -> pl.DataFrame:
    path = Path(path)
    if not path.exists():
        raise InputError(f"question file {path} does not exist")
    if path.suffix.lower() == ".csv":
        raw = pl.read_csv(path, infer_schema=False)
    elif path.suffix.lower() in (".jsonl", ".json"):
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        raw = pl.DataFrame(
            [{k: v if not isinstance(v, list) else ";".join(map(str, v)) for k, v in r.items()} for r in lines],
            infer_schema_length=None,
        )
    else:
        raise InputError(f"{path}: questions must be .csv or .jsonl")
    if "question" not in raw.columns:
        raise InputError(f"{path}: no 'question' column; it has: {', '.join(raw.columns)}")
    rows = []
    for r in raw.iter_rows(named=True):
        question = (r.get("question") or "").strip()
        if not question:
            continue
        evidence = r.get("gold_evidence") or ""
        rows.append(
            {
                "question_id": str(r.get("id") or content_id("question", question))[:16],
                "question": question,
                "kind": r.get("kind") or "file",
                "gold_answer": r.get("gold_answer"),
                "gold_evidence": [e.strip() for e in str(evidence).replace(",", ";").split(";") if e.strip()],
            }
        )
    return pl.DataFrame(rows, schema=QUESTION_SCHEMA)


def generate_questions(data: IndexData, n: int) -> pl.DataFrame:
    """Half global (from the highest-ranked reports), half local (from the highest-degree entities)."""
    reports = sorted(data.report_by_community.values(), key=lambda r: (-(r["rank"] or 0), r["community"]))
    entities = sorted(data.entity_rows.values(), key=lambda e: (-e["degree"], e["title"]))
    rows = []
    n_global = n // 2
    for report in reports[:n_global]:
        cjk = any("\u3400" <= ch <= "\u9fff" for ch in report["title"])
        q = (
            f"关于「{report['title']}」，整体上有哪些主要主题和关联？"
            if cjk
            else f"What are the main themes and connections around {report['title']}?"
        )
        rows.append({"question": q, "kind": "global", "gold_evidence": []})
    for entity in entities[: n - len(rows)]:
        cjk = any("\u3400" <= ch <= "\u9fff" for ch in entity["title"])
        q = (
            f"{entity['title']}是谁或是什么？与哪些人和事有关？"
            if cjk
            else f"Who or what is {entity['title']}, and what is it connected to?"
        )
        units = [
            data.text_unit_rows[u]["human_readable_id"] for u in entity["text_unit_ids"] if u in data.text_unit_rows
        ]
        rows.append({"question": q, "kind": "local", "gold_evidence": [str(u) for u in units]})
    for r in rows:
        r.update(question_id=content_id("question", r["question"])[:16], gold_answer=None)
    return pl.DataFrame(rows, schema=QUESTION_SCHEMA)
