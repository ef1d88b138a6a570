"""What the simulator answers, per kind of prompt.

Answers are derived from the prompt's own data (entities that really occur in the chunk, reports about the
given entities, points taken from the given reports), so an index built against the simulator is a real,
meaningful graph. Both this project's prompts and Microsoft GraphRAG's are recognised.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

from graphrag_ray.nlp.entities import mentions, sentences
from graphrag_ray.nlp.relevance import terms
from graphrag_ray.parsing.context_tables import parse_context_tables
from graphrag_ray.simulate.query_responders import query_kind, respond_query

TUPLE, RECORD, COMPLETE = "<|>", "##", "<|COMPLETE|>"
_CORE_TYPES = {
    "PERSON": ("PERSON", "PEOPLE", "人物", "人"),
    "GEO": ("GEO", "LOCATION", "PLACE", "GPE", "地点"),
    "ORGANIZATION": ("ORGANIZATION", "ORG", "COMPANY", "组织", "机构", "公司"),
}


def respond(body: dict[str, Any]) -> tuple[str, str]:
    """(kind, content) for a chat completion request body."""
    messages = body.get("messages") or []
    texts = [_text(m.get("content")) for m in messages]
    last = texts[-1] if texts else ""
    everything = "\n".join(texts)
    schema = _json_schema(body)
    system = texts[0] if messages and messages[0].get("role") == "system" else ""
    query_kind_ = query_kind(system or last)
    if query_kind_ is not None:
        question = last if system else _question(last)
        return f"query_{query_kind_}", respond_query(query_kind_, system or last, question)
    answered = _index_answer(texts, last, everything)
    if answered is not None:
        return answered
    if schema is not None:
        return "json_schema", json.dumps(schema_instance(schema, everything), ensure_ascii=False)
    if (body.get("response_format") or {}).get("type") == "json_object":
        return "json", json.dumps({"answer": plausible_answer(everything)}, ensure_ascii=False)
    return "chat", plausible_answer(everything)


def _index_answer(texts: list[str], last: str, everything: str) -> tuple[str, str] | None:
    """(kind, content) for an indexing prompt (prompt tuning, extraction, claims, resolution, summaries, reports),
    known by its wording; None for another request."""
    if "setting up a knowledge-graph extraction" in everything:  # asked again: the question is still above
        return "prompt_tune", prompt_tune(next(t for t in texts if "setting up a knowledge-graph extraction" in t))
    if "Answer Y if there are still entities" in last:
        return "extract_loop", "N"
    if "-Goal-" in everything and "-Real Data-" in everything and "Entity_types:" in everything:
        source = next(t for t in texts if "-Real Data-" in t)
        first_round = "entities and relationships were missed" not in everything
        return ("extract_graph" if first_round else "extract_glean"), extract_graph(source, first_round)
    if "-Target activity-" in everything and "Claim description:" in everything:
        source = next(t for t in texts if "Claim description:" in t)
        first_round = "claims were missed" not in everything
        return ("extract_claims" if first_round else "extract_claims_glean"), claims(source, first_round)
    if "-Pairs to decide-" in everything:
        return "resolve_entities", resolve_entities(last)
    if "Items to Revise:" in last:
        return "summarize_update_batch", summarize_update_batch(last)
    if "Descriptions No Longer True:" in last:
        return "summarize_update", summarize_update(last)
    if "Description List:" in last:
        return "summarize", summarize(last)
    if "information discovery" in everything and "findings" in everything:
        if "# Previous report" in last:
            return "community_report_revision", revised_report(last)
        return "community_report", community_report(last)
    return None


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def _json_schema(body: dict) -> dict | None:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema") or {}
    return None


# ----------------------------------------------------------------------------------------- extraction
def _section(prompt: str, start: str, end: str) -> str:
    i = prompt.rfind(start)
    if i < 0:
        return ""
    j = prompt.find(end, i + len(start))
    return prompt[i + len(start) : j if j >= 0 else None]


def prompt_tune(prompt: str) -> str:
    """prompt-tune's question: the samples' language, a domain named after their most frequent content words,
    the core entity types (in that language) plus one from the corpus, and a worked example from the first
    sample."""
    from collections import Counter

    chinese = "(language: 中文)" in prompt
    samples = _section(prompt, "---Samples---", "Reply with JSON").strip()
    first = re.sub(r"^\[1\]\s*", "", samples.split("\n\n")[0])
    words = Counter(m.name for m in mentions(samples) if m.type == "CONCEPT" or not chinese)
    top = [w for w, _ in words.most_common(3)] or (["资料"] if chinese else ["records"])
    types = (["人物", "组织", "地点"] if chinese else ["PERSON", "ORGANIZATION", "GEO"]) + [top[0].upper()]
    entities, relationships = graph_of(first, types)
    return json.dumps(
        {
            "domain": ("关于" + "、".join(top) + "的文档") if chinese else "documents about " + ", ".join(top),
            "persona": "一位熟悉该领域的分析师。" if chinese else "An analyst who knows this field well.",
            "entity_types": types,
            "example": {
                "text": first,
                "entities": [{"name": n, "type": t, "description": d} for n, (t, d) in list(entities.items())[:8]],
                "relationships": [
                    {"source": a, "target": b, "description": d, "strength": w}
                    for (a, b), (d, w) in list(relationships.items())[:8]
                ],
            },
        },
        ensure_ascii=False,
    )


def extract_graph(prompt: str, first_round: bool) -> str:
    real = prompt[prompt.rfind("-Real Data-") :]
    types = [t.strip().upper() for t in _section(real, "Entity_types:", "\n").split(",") if t.strip()]
    text = _section(real, "Text:", "\n######################\nOutput:").strip()
    entities, relationships = graph_of(text, types or ["ORGANIZATION", "PERSON", "GEO", "EVENT"])
    names = list(entities)
    keep = math.ceil(len(names) * 0.75) if len(names) > 3 else len(names)
    chosen = set(names[:keep]) if first_round else set(names[keep:])
    records = [f'("entity"{TUPLE}{n}{TUPLE}{entities[n][0]}{TUPLE}{entities[n][1]})' for n in names if n in chosen]
    for (a, b), (desc, strength) in relationships.items():
        if (first_round and a in chosen and b in chosen) or (not first_round and (a in chosen or b in chosen)):
            records.append(f'("relationship"{TUPLE}{a}{TUPLE}{b}{TUPLE}{desc}{TUPLE}{strength})')
    return f"\n{RECORD}\n".join(records) + f"\n{COMPLETE}"


def graph_of(text: str, types: list[str]) -> tuple[dict[str, tuple[str, str]], dict[tuple[str, str], tuple]]:
    """Entities (name -> (type, description)) and co-occurrence relationships in `text`."""

    def type_of(kind: str) -> str | None:
        for core, aliases in _CORE_TYPES.items():
            if kind == core:
                return next((t for t in types if t in aliases), None)
        spare = [t for t in types if not any(t in a for a in _CORE_TYPES.values())]
        return spare[0] if spare else None

    entities: dict[str, tuple[str, str]] = {}
    pair_sentences: dict[tuple[str, str], list[str]] = {}
    subject = None  # the first name of the last sentence that named one: what a following "It ..." refers to
    for _, sentence in sentences(text):
        names = []
        for m in _in_sentence(text, sentence):
            kind = type_of(m.type)
            if kind is None:
                continue
            name = m.name.upper() if m.name.isascii() else m.name
            if name not in entities:
                entities[name] = (kind, _clean(sentence))
            if name not in names:
                names.append(name)
        # a model resolves a pronoun to the subject named before it and relates what the sentence names to that
        # subject
        # (Microsoft GraphRAG's extraction prompt relates SAMUEL NAMARA to FIRUZABAD, named sentences apart)
        if subject is not None and subject not in names and _PRONOUN.search(sentence):
            names = [subject, *names]
        for i, a in enumerate(names[:6]):
            for b in names[i + 1 : 6]:
                pair_sentences.setdefault((a, b), []).append(_clean(sentence))
        if names and not _PRONOUN_START.match(sentence):
            subject = names[0]
    relationships = {pair: (sents[0], min(10, 2 + 2 * len(sents))) for pair, sents in pair_sentences.items()}
    return entities, relationships


_MENTION_CACHE: dict[str, list] = {}
_PRONOUN_START = re.compile(r"(?:It|He|She|They|Its|His|Her|Their)\b")
_PRONOUN = re.compile(r"\b(?:[Ii]ts?|[Hh]e|[Ss]he|[Tt]hey|[Hh]is|[Hh]er|[Tt]heir)\b")


def _in_sentence(text: str, sentence: str):
    """Mentions of the whole text that fall inside this sentence (concept counts use the whole text)."""
    key = hashlib.sha1(text.encode()).hexdigest()
    if key not in _MENTION_CACHE:
        if len(_MENTION_CACHE) > 256:
            _MENTION_CACHE.clear()
        _MENTION_CACHE[key] = mentions(text)
    names = {m.name: m for m in _MENTION_CACHE[key]}
    return [m for name, m in names.items() if name in sentence]


def _clean(sentence: str) -> str:
    return sentence.replace(TUPLE, " ").replace(COMPLETE, " ").replace("\n", " ")[:300]


def resolve_entities(prompt: str) -> str:
    """Entity resolution's question, answered as a careful reader would: a title, initials or another width is the
    same name; a surname or a part of a name is the full name its own descriptions name (when they name exactly
    one of the candidates: "the text says so"); names alike only in their embeddings are merged only when they are
    the same letters."""
    described = dict(
        re.findall(r"^- (.+?) \[[^\]]*\]: (.*)$", _section(prompt, "-Candidates-", "-Pairs to decide-"), re.M)
    )
    pairs = re.findall(r"^- (.+?) ~ (.+?) \(([^)]*)\)$", _section(prompt, "-Pairs to decide-", "-Answer-"), re.M)
    fulls: dict[str, list[str]] = {}
    for short, full, _ in pairs:
        fulls.setdefault(short, []).append(full)
    groups: dict[str, set[str]] = {}
    for short, full, rule in pairs:
        if rule in ("same name without its title", "same name", "initials"):
            same = True
        elif rule == "similar name embeddings":
            same = re.sub(r"\W", "", short).lower() == re.sub(r"\W", "", full).lower()
        else:
            named = [f for f in fulls[short] if f.lower() in described.get(short, "").lower()]
            same = named == [full]
        if same:
            groups.setdefault(full, {full}).add(short)
    merges = [
        {
            "names": [full] + sorted(names - {full}),
            "reason": f"{', '.join(sorted(names - {full}))} is another name of {full} in these documents",
        }
        for full, names in sorted(groups.items())
    ]
    return json.dumps({"merges": merges}, ensure_ascii=False)


def claims(prompt: str, first_round: bool) -> str:
    """A claim per sentence that names two entities: subject, object, the sentence as evidence."""
    if not first_round:
        return COMPLETE
    text = _section(prompt[prompt.rfind("-Real Data-") :], "Text:", "\nOutput:").strip()
    entities, relationships = graph_of(text, ["ORGANIZATION", "PERSON", "GEO", "EVENT"])
    records = [
        f"({a}{TUPLE}{b}{TUPLE}FACT{TUPLE}TRUE{TUPLE}NONE{TUPLE}NONE{TUPLE}{desc}{TUPLE}{desc})"
        for (a, b), (desc, _) in list(relationships.items())[:3]
    ]
    return f"\n{RECORD}\n".join(records) + f"\n{COMPLETE}"


# ----------------------------------------------------------------------------------------- summaries
def summarize(prompt: str) -> str:
    names = _section(prompt, "Entities:", "\n").strip()
    raw = _section(prompt, "Description List:", "\n#######").strip()
    try:
        items = json.loads(raw)
    except ValueError:
        items = [line.strip() for line in raw.splitlines() if line.strip()]
    unique = list(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))
    body = " ".join(unique)
    return f"{names}: {body}"[:1500]


def summarize_update(prompt: str) -> str:
    """The new descriptions, then the current description without what the removed ones said (a model rewrites;
    this keeps the sentences, so a test can see what came and went)."""

    def listed(label: str, end: str) -> list[str]:
        raw = _section(prompt, label, end).strip()
        try:
            return [str(i).strip() for i in json.loads(raw) if str(i).strip()]
        except ValueError:
            return [line.strip() for line in raw.splitlines() if line.strip()]

    return _revised(
        _section(prompt, "Entities:", "\n").strip(),
        _section(prompt, "Current Description:", "\nNew Descriptions:").strip(),
        listed("New Descriptions:", "\nDescriptions No Longer True:"),
        listed("Descriptions No Longer True:", "\n#######"),
    )


def summarize_update_batch(prompt: str) -> str:
    """Several revisions asked at once (a JSON list of items): one JSON object, each item's number to what
    summarize_update would have answered for it alone."""
    try:
        entries = json.loads(_section(prompt, "Items to Revise:", "\n#######").strip())
    except ValueError:
        return "{}"
    return json.dumps(
        {
            str(e.get("item")): _revised(
                str(e.get("entities", "")),
                str(e.get("current_description", "")),
                [str(d) for d in e.get("new_descriptions") or ()],
                [str(d) for d in e.get("descriptions_no_longer_true") or ()],
            )
            for e in entries
            if isinstance(e, dict)
        },
        ensure_ascii=False,
    )


def _revised(names: str, current: str, added: list[str], removed: list[str]) -> str:
    body = current[len(names) + 2 :] if current.startswith(names + ": ") else current
    for gone in (r.strip() for r in removed):
        if gone:
            body = body.replace(gone, "")
    body = " ".join(" ".join([*(a.strip() for a in added if a.strip()), body]).split())
    return f"{names}: {body}"[:1500]


# ----------------------------------------------------------------------------------------- reports
def _tables(text: str) -> dict[str, list[dict[str, str]]]:
    return parse_context_tables(text)


def community_report(prompt: str) -> str:
    data = prompt[prompt.rfind("Text:") :] if "Text:" in prompt else prompt
    data = data[: data.rfind("\nOutput:")] if "\nOutput:" in data else data  # the prompt's last line, not a row
    tables = _tables(data)
    entities = tables.get("entities", [])
    relations = tables.get("relationships", [])
    reports = tables.get("reports", [])
    names = [e.get("title") or e.get("entity") or "" for e in entities if (e.get("title") or e.get("entity"))]
    if not names and reports:
        names = [r.get("title", "") for r in reports[:3]]
    title_names = names[:3] or ["Unnamed community"]
    cjk = any(not n.isascii() for n in title_names)
    title = ("、".join(title_names) + "相关社区") if cjk else " and ".join(title_names) + " community"
    descriptions = [e.get("description", "") for e in entities[:3] if e.get("description")]
    ent_ids = ", ".join(e.get("id") or e.get("human_readable_id") or "" for e in entities[:5])
    summary = " ".join(descriptions)[:600] + (f" [Data: Entities ({ent_ids})]" if ent_ids else "")
    findings = []
    for rel in relations[:6]:
        rid = rel.get("id") or rel.get("human_readable_id") or ""
        findings.append(
            {
                "summary": f"{rel.get('source', '')} - {rel.get('target', '')}",
                "explanation": f"{rel.get('description', '')} [Data: Relationships ({rid})]",
            }
        )
    for rep in reports[:3] if not findings else []:
        findings.append({"summary": rep.get("title", ""), "explanation": rep.get("summary", "")[:400]})
    if not findings:
        findings.append({"summary": title, "explanation": summary})
    rating = round(min(10.0, 1.0 + 0.5 * len(entities) + 0.25 * len(relations)), 1)
    return json.dumps(
        {
            "title": title,
            "summary": summary,
            "rating": rating,
            "rating_explanation": f"{len(entities)} entities and {len(relations)} relationships.",
            "findings": findings,
        },
        ensure_ascii=False,
    )


def revised_report(prompt: str) -> str:
    """A revision as a model writes one, to the limits of a report written afresh: the previous report's title; its
    summary rewritten with what the changed entities say in front; the findings the changed relationships bring,
    then the previous findings that neither name a removed entity nor are written again from a changed row. A
    change with no relationship adds no finding (a fresh report's fallback finding, which repeats its summary,
    would make every revision longer than the report it revises)."""
    fresh = json.loads(community_report(prompt))
    previous = _section(prompt, "# Previous report", "\n# Changes").strip()
    changes = _tables(prompt[prompt.rfind("Text:") :])
    removed = {row.get("title", "") for row in changes.get("removed entities", [])}
    blocks = previous.split("\n## ")
    head = blocks[0].splitlines()
    title = head[0].lstrip("# ").strip() if head else fresh["title"]
    summary = " ".join(line for line in head[1:] if line.strip())
    new_findings = fresh["findings"] if changes.get("relationships") else []
    kept, rewritten = [], {f["summary"] for f in new_findings}
    for block in blocks[1:]:
        name, _, explanation = block.partition("\n")
        if name.strip() not in rewritten and not any(t and t in block for t in removed):
            kept.append({"summary": name.strip(), "explanation": explanation.strip()})
    findings = (new_findings + kept)[:6] or fresh["findings"]
    said, _, cited = fresh["summary"].partition(" [Data: ")
    rewritten_summary = (said + " " + summary).strip()[:600] + (f" [Data: {cited}" if cited else "")
    return json.dumps(
        {**fresh, "title": title or fresh["title"], "summary": rewritten_summary, "findings": findings},
        ensure_ascii=False,
    )


# ----------------------------------------------------------------------------------------- generic
def plausible_answer(text: str) -> str:
    """Sentences of the prompt's data that best share words with its question, with a citation."""
    question = _question(text)
    terms = _terms(question)
    scored = []
    for _, sentence in sentences(text):
        if sentence == question or len(sentence) < 6:
            continue
        overlap = len(terms & _terms(sentence))
        if overlap:
            scored.append((-overlap, sentence))
    scored.sort()
    picked = [s for _, s in scored[:3]]
    if not picked:
        return "I do not know: the data provided does not answer this question."
    return " ".join(picked)


def _question(text: str) -> str:
    for marker in ("---Question---", "Question:", "User:", "query:"):
        if marker in text:
            return (
                text[text.rfind(marker) + len(marker) :].strip().splitlines()[0]
                if text[text.rfind(marker) + len(marker) :].strip()
                else ""
            )
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _terms(text: str) -> set[str]:
    return terms(text)


def schema_instance(schema: dict, context: str, depth: int = 0) -> Any:
    """A value conforming to a JSON schema, with text taken from the context."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        return {
            name: schema_instance(sub, context, depth + 1) for name, sub in (schema.get("properties") or {}).items()
        }
    if kind == "array":
        return [
            schema_instance(schema.get("items") or {"type": "string"}, context, depth + 1)
            for _ in range(max(1, schema.get("minItems", 1)))
        ]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.0))
    if kind == "boolean":
        return True
    return plausible_answer(context)[:200] if depth < 4 else "text"
