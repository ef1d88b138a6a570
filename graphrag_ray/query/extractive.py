"""Answers with no LLM: the most relevant evidence sentences of the context a method built, cited as GraphRAG
cites (`[Data: Sources (..); Entities (..)]`) and clearly marked as extractive. Global search's "points" are
the reports' best sentences ranked by relevance to the question."""

from __future__ import annotations

from graphrag_ray.nlp.entities import sentences
from graphrag_ray.nlp.relevance import best_sentences
from graphrag_ray.parsing.context_tables import parse_context_tables
from graphrag_ray.query.context.budget import cite

MARK = "[Extractive answer: no LLM was used; these are the most relevant sentences of the indexed data.]"
NOTHING = "[Extractive answer: no LLM was used.] Nothing in the indexed data matches this question."
# table name -> (citation label, column holding the evidence text); source text first: it is the original
EVIDENCE = {
    "sources": ("Sources", "text"),
    "entities": ("Entities", "description"),
    "relationships": ("Relationships", "description"),
    "reports": ("Reports", "content"),
}


GIST = (
    "[Extractive answer: no LLM was used; no sentence of the data shares the question's words - the gist of the "
    "highest-ranked communities instead.]"
)


def extractive_answer(
    question: str, context_text: str, max_sentences: int = 5, gist: bool = False
) -> tuple[str, list[dict]]:
    """(answer, the evidence used: [{table, id, sentence, score}]). `gist` (global search): a question that shares
    no word with the data ("What are the main themes?") is answered by the first sentence of each of the
    highest-ranked reports in the context."""
    tables = parse_context_tables(context_text)
    evidence = [
        (label, row.get("id", ""), row.get(column) or "")
        for name, (label, column) in EVIDENCE.items()
        for row in tables.get(name, [])
    ]
    picked = best_sentences(question, [text for *_, text in evidence], max_sentences)
    if not picked and gist:
        return _gist(tables.get("reports", []), max_sentences)
    if not picked:
        return NOTHING, []
    used = [{"table": evidence[i][0], "id": evidence[i][1], "sentence": s, "score": score} for score, s, i in picked]
    refs: dict[str, list] = {}
    for u in used:  # a sentence is cited wherever it stands: its source text, and the reports that repeat it
        for label, row_id, text in evidence:
            if u["sentence"] in text and row_id not in refs.setdefault(label, []):
                refs[label].append(row_id)
    refs = {label: ids for label, ids in refs.items() if ids}
    citation = "; ".join(f"{label} ({cite(ids)})" for label, ids in refs.items())
    body = " ".join(dict.fromkeys(u["sentence"] for u in used))
    return f"{MARK}\n{body} [Data: {citation}]", used


def _gist(reports: list[dict], most: int) -> tuple[str, list[dict]]:
    """The first sentence of each report's summary (its content after the title heading), best-ranked first."""
    ranked = sorted(reports, key=lambda r: -_number(r.get("rank")))[:most]
    used = []
    for report in ranked:
        body = [
            line for line in (report.get("content") or "").splitlines() if line.strip() and not line.startswith("#")
        ]
        spans = [span for _, span in sentences(body[0])] if body else []
        if spans:
            used.append({"table": "Reports", "id": report.get("id", ""), "sentence": spans[0].strip(), "score": 0.0})
    if not used:
        return NOTHING, []
    body = " ".join(dict.fromkeys(u["sentence"] for u in used))
    return f"{GIST}\n{body} [Data: Reports ({cite([u['id'] for u in used])})]", used


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0
