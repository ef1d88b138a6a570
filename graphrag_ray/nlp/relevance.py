"""Query-term overlap for extractive answers (no LLM) and the simulator: English words and CJK bigrams."""

from __future__ import annotations

import re

from graphrag_ray.nlp.entities import sentences

_STOP = {
    "the",
    "and",
    "for",
    "are",
    "was",
    "were",
    "what",
    "which",
    "who",
    "whom",
    "how",
    "why",
    "when",
    "where",
    "does",
    "did",
    "has",
    "have",
    "had",
    "with",
    "that",
    "this",
    "these",
    "those",
    "from",
    "into",
    "about",
    "main",
    "its",
    "his",
    "her",
    "their",
    "there",
    "been",
    "being",
    "any",
    "all",
    "can",
    "could",
    "would",
}


def terms(text: str | None) -> set[str]:
    text = text or ""
    words = {w.lower() for w in re.findall(r"[A-Za-z]{3,}", text)} - _STOP
    cjk = re.findall(r"[\u3400-\u9fff]", text)
    words.update(a + b for a, b in zip(cjk, cjk[1:]))
    return words


def overlap(question: str, text: str | None) -> int:
    return len(terms(question) & terms(text))


def best_sentences(question: str, texts: list[str], n: int = 3) -> list[tuple[int, str, int]]:
    """(score, sentence, index of its text), best first; sentences sharing no term with the question are left out."""
    q = terms(question)
    scored = []
    for index, text in enumerate(texts):
        for _, sentence in sentences((text or "").replace("|", " ")):
            if len(sentence) < 6 or sentence.startswith(("#", "-----")):
                continue
            score = len(q & terms(sentence))
            if score:
                scored.append((-score, index, sentence))
    scored.sort()
    out, seen = [], set()
    for neg, index, sentence in scored:
        if sentence not in seen:
            seen.add(sentence)
            out.append((-neg, sentence, index))
        if len(out) == n:
            break
    return out
