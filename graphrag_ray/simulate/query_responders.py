"""Simulator answers to query-time prompts (this project's and Microsoft GraphRAG's): map points, reduce,
relevance ratings, DRIFT primer and follow-ups, question lists, routing, and cited answers from the context."""

from __future__ import annotations

import json
import re

from graphrag_ray.nlp.relevance import best_sentences, overlap
from graphrag_ray.parsing.context_tables import parse_context_tables as _tables


def query_kind(system: str) -> str | None:
    markers = [
        ("judge", "evaluating two answers to the same question"),
        ("question_gen", "generating a bulleted list of"),
        ("rating", "Rate each report for how relevant"),
        ("router", "Classify the user's question"),
        ("hyde", "Write a short community report"),
        ("drift_primer", "reason over a knowledge graph in response to a user query"),
        ("drift_local", "follow_up_queries"),
        ("global_reduce", "multiple analysts"),
        ("global_map", "Importance Score"),
        ("answer", "---Data tables---"),
        ("answer", "---Data Reports---"),
        ("answer", "---Local answer---"),
    ]
    for kind, marker in markers:
        if marker in system:
            return kind
    return None


def respond_query(kind: str, system: str, question: str) -> str:
    return {
        "judge": judge,
        "question_gen": question_gen,
        "rating": rating,
        "router": router,
        "hyde": hyde,
        "drift_primer": drift_primer,
        "drift_local": drift_local,
        "global_map": global_map,
        "global_reduce": global_reduce,
        "answer": answer,
    }[kind](system, question)


def _overlap(question: str, text: str) -> int:
    return overlap(question, text)


def _ids(rows: list[dict], limit: int = 5) -> str:
    ids = [r.get("id", "") for r in rows if r.get("id", "") != ""]
    return ", ".join(ids[:limit]) + (", +more" if len(ids) > limit else "")


def _best_sentences(question: str, texts: list[str], n: int = 3) -> list[str]:
    return [sentence for _, sentence, _ in best_sentences(question, texts, n)]


def answer(system: str, question: str) -> str:
    tables = _tables(system)
    parts = []
    refs = []
    for name, label, text_col in (
        ("sources", "Sources", "text"),
        ("reports", "Reports", "content"),
        ("entities", "Entities", "description"),
        ("relationships", "Relationships", "description"),
    ):
        rows = [r for r in tables.get(name, []) if _overlap(question, " ".join(str(v) for v in r.values()))]
        if rows:
            refs.append(f"{label} ({_ids(rows)})")
            parts += [str(r.get(text_col) or "") for r in rows[:3]]
    if not parts:  # other tables (e.g. DRIFT's intermediate answers): every cell is evidence
        for rows in tables.values():
            parts += [" ".join(str(v) for k, v in r.items() if k not in ("id", "score")) for r in rows]
    analysts = re.findall(r"----Analyst \d+----\nImportance Score: [\d.]+\n(.+)", system)
    for section in ("---Local answer---", "---Global answer---"):
        if section in system:
            parts.append(system.split(section, 1)[1].split("---", 1)[0])
    parts += analysts
    best = _best_sentences(question, parts) if parts else []
    if not best:
        return "I do not know: the data provided does not answer this question."
    text = " ".join(best)
    if refs and "[Data:" not in text:
        text += f" [Data: {'; '.join(refs)}]"
    return text


def global_map(system: str, question: str) -> str:
    points = []
    for report in _tables(system).get("reports", []):
        content = report.get("content", "")
        score = _overlap(question, content)
        if score:
            lead = " ".join(_best_sentences(question, [content], 2))
            points.append(
                {"description": f"{lead} [Data: Reports ({report.get('id', '')})]", "score": min(100, 10 * score)}
            )
    return json.dumps({"points": points}, ensure_ascii=False)


def global_reduce(system: str, question: str) -> str:
    """The reduce answer keeps the references of the analysts' points it uses, as the reduce prompt asks (a real
    model copies them; sentences alone would drop them)."""
    text = answer(system, question)
    if "[Data:" in text:
        return text
    analysts = re.findall(r"----Analyst \d+----\nImportance Score: [\d.]+\n(.+)", system)
    cited = []
    for point in analysts:
        body = point.split("[Data:", 1)[0]
        if any(sentence.strip() and sentence.strip() in text for sentence in re.split(r"(?<=[.!?。！？])\s*", body)):
            cited += [i.strip() for ids in re.findall(r"Reports \(([^)]*)\)", point) for i in ids.split(",")]
    cited = [i for n, i in enumerate(cited) if i and i not in cited[:n]]
    return text + (f" [Data: Reports ({', '.join(cited)})]" if cited else "")


def rating(system: str, question: str) -> str:
    """Dynamic selection's batched rating: each report (a row id|title|summary) scored by the question's terms it
    holds (0-5)."""
    q = system.split("---Question---", 1)[1].split("---Community reports---", 1)[0]
    table = system.split("---Community reports---", 1)[1].split("\n\nRate each report", 1)[0]
    ratings = {}
    for line in table.strip().splitlines():
        cells = line.split("|", 1)
        if len(cells) == 2 and cells[0].strip().isdigit() and (score := min(5, _overlap(q, cells[1]))):
            ratings[cells[0].strip()] = score  # only the reports rated 1 or more, as the prompt asks
    return json.dumps({"ratings": ratings})


def router(system: str, question: str) -> str:
    q = system.split("Question:", 1)[1].split("\n", 1)[0]
    route = "global" if re.search(r"theme|overall|trend|主题|总体", q, re.I) else "local"
    return json.dumps({"route": route, "reason": "simulated classification"})


def hyde(system: str, question: str) -> str:
    q = system.split("Question:", 1)[1].strip()
    return f"# {q}\n\nA report about {q}"


def _follow_ups(text: str, asked: str, n: int = 3) -> list[str]:
    names = []
    for row in _tables(text).get("entities", []):
        name = row.get("entity") or row.get("title")
        if name and name not in asked and name not in names:
            names.append(name)
    if not names:
        names = [w for w in re.findall(r"[\u3400-\u9fff]{2,4}|[A-Z][a-z]+(?: [A-Z][a-z]+)*", text) if w not in asked][
            :n
        ]
    cjk = bool(re.search(r"[\u3400-\u9fff]", asked))
    return [(f"{name}的情况如何？" if cjk else f"What else is known about {name}?") for name in names[:n]]


def drift_primer(system: str, question: str) -> str:
    query = system.split("For the query:", 1)[1].split("The top-ranked community summaries:", 1)[0].strip()
    reports = system.split("The top-ranked community summaries:", 1)[1]
    best = _best_sentences(query, [reports], 3)
    score = min(100, 10 * _overlap(query, reports))
    return json.dumps(
        {
            "intermediate_answer": "# " + query + "\n\n" + " ".join(best),
            "score": score,
            "follow_up_queries": _follow_ups(reports, query),
        },
        ensure_ascii=False,
    )


def drift_local(system: str, question: str) -> str:
    text = answer(system, question)
    score = min(100, 10 * _overlap(question, system))
    return json.dumps(
        {"response": text, "score": score, "follow_up_queries": _follow_ups(system, question, 2)}, ensure_ascii=False
    )


def question_gen(system: str, question: str) -> str:
    count = int(re.search(r"bulleted list of (\d+)", system).group(1))
    asked = question
    names = []
    for row in _tables(system).get("entities", []):
        name = row.get("entity")
        if name and name not in names:
            names.append(name)
    cjk = bool(re.search(r"[\u3400-\u9fff]", asked))
    subjects = names or ["the data"]
    lines = []
    for i in range(count):
        name = subjects[i % len(subjects)]
        lines.append(f"- {name}在其中扮演了什么角色？" if cjk else f"- What role does {name} play?")
    return "\n".join(lines)


def judge(system: str, question: str) -> str:
    """Deterministic verdicts: more content wins comprehensiveness, more distinct terms diversity, more
    citations empowerment, the shorter answer directness; near-equal answers tie."""
    one = system.split("---Answer 1---", 1)[1].split("---Answer 2---", 1)[0]
    two = system.split("---Answer 2---", 1)[1].split("---Goal---", 1)[0]

    def pick(a: float, b: float, higher: bool = True) -> int:
        if abs(a - b) <= 0.05 * max(a, b, 1):
            return 0
        return 1 if (a > b) == higher else 2

    from graphrag_ray.nlp.relevance import terms

    verdict = {
        "comprehensiveness": pick(len(one), len(two)),
        "diversity": pick(len(terms(one)), len(terms(two))),
        "empowerment": pick(one.count("Data:") + one.count("("), two.count("Data:") + two.count("(")),
        "directness": pick(len(one), len(two), higher=False),
    }
    return json.dumps({k: {"winner": v, "reason": "simulated judgment"} for k, v in verdict.items()})
