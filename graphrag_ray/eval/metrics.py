"""Gold-data metrics: exact and fuzzy answer match, and evidence recall of the context."""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher

import polars as pl

FUZZY_THRESHOLD = 0.6


def _norm(text: str | None) -> str:
    text = unicodedata.normalize("NFKC", text or "").casefold()
    text = re.sub(r"\[data:[^\]]*\]|\[extractive answer[^\]]*\]", " ", text)
    return re.sub(r"[\W_]+", " ", text).strip()


def exact_match(answer: str, gold: str) -> bool:
    return bool(gold) and _norm(gold) in _norm(answer)


def fuzzy_match(answer: str, gold: str) -> float:
    """Best similarity of the gold answer to any window of the answer of the same length (0-1)."""
    a, g = _norm(answer), _norm(gold)
    if not a or not g:
        return 0.0
    if g in a:
        return 1.0
    width = len(g)
    step = max(1, width // 4)
    return max(SequenceMatcher(None, a[i : i + width], g).ratio() for i in range(0, max(1, len(a) - width + 1), step))


def gold_metrics(questions: pl.DataFrame, answers: pl.DataFrame) -> pl.DataFrame:
    gold = {r["question_id"]: r for r in questions.iter_rows(named=True)}
    rows = []
    for r in answers.iter_rows(named=True):
        g = gold.get(r["question_id"]) or {}
        evidence = set(g.get("gold_evidence") or [])
        fuzzy = fuzzy_match(r["answer"], g.get("gold_answer") or "") if g.get("gold_answer") else None
        rows.append(
            {
                "question_id": r["question_id"],
                "method": r["method"],
                "exact_match": exact_match(r["answer"], g.get("gold_answer") or "") if g.get("gold_answer") else None,
                "fuzzy_score": fuzzy,
                "fuzzy_match": None if fuzzy is None else fuzzy >= FUZZY_THRESHOLD,
                "evidence_recall": (
                    len(evidence & set(r["source_ids"])) / len(evidence)
                    if evidence and r["source_ids"] is not None
                    else None  # no gold evidence, or a context of reports, not passages
                ),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "question_id": pl.String,
            "method": pl.String,
            "exact_match": pl.Boolean,
            "fuzzy_score": pl.Float64,
            "fuzzy_match": pl.Boolean,
            "evidence_recall": pl.Float64,
        },
    )
