"""Tolerant parsers for LLM output. They never raise: what they cannot use is counted and returned.

Real models answer the tuple format in many shapes (seen in public Microsoft GraphRAG caches of gpt-4o, deepseek-r1,
mistral, gemma and llama answers): records separated by the record delimiter or only by new lines, numbered or
bulleted; closed with `)`, `>`, `)<|>` or `){N}` (the strength after the bracket); curly quotes; notes before the
first record or after the last. A record runs from its opening `("entity"<|>` / `("relationship"<|>` to the next
opening, so one record can never swallow another, whatever separates them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

TUPLE_DELIMITER = "<|>"
RECORD_DELIMITER = "##"
COMPLETION_DELIMITER = "<|COMPLETE|>"

# curly quotes used as a field's quotes (next to a bracket or a delimiter); those inside a text are its own
_CURLY_EDGE = re.compile(r"(?:(?<=[(>])\s*[“”„‘’＂])|(?:[“”„‘’＂](?=\s*(?:<\||\|>|\)|>|$)))", re.M)


def _straight(text: str) -> str:
    return _CURLY_EDGE.sub('"', text) if any(q in text for q in "“”„‘’＂") else text


_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S | re.I)
_TUPLE = re.escape(TUPLE_DELIMITER)
# what closes a record at the end of its span: ) or > , perhaps a stray tuple delimiter, perhaps {strength}
_CLOSE = r"(?:\)|(?<!\|)>)"  # ) or >, but not the > of a tuple delimiter
_NEXT_MARKER = re.compile(r"(?:(?<=[)\"'])|(?<=[^|]>)|\n)\s*(?:\d+\s*[.)]|[-*•])\s*$")


@dataclass(frozen=True)
class _Dialect:
    """The patterns of one tuple delimiter: Microsoft GraphRAG's `<|>`, or the single `|` of our own prompt (a
    record in 12-18 tokens of format instead of 19-27: the answer is what is billed at the output price)."""

    opening: re.Pattern  # a record's opening: ( "entity" <|>   (quotes optional, any case)
    closing: re.Pattern
    closing_in_line: re.Pattern  # the same, followed by a line break: a record closed there, with prose after it
    field_split: re.Pattern
    kindless: re.Pattern  # a record that lost its kind, on a line of its own, numbered or bulleted or not


def _dialect(tuple_re: str, split_re: str) -> _Dialect:
    closing = _CLOSE + r"\s*(?:" + tuple_re + r")?\s*(?:\{\s*(-?\d+(?:\.\d+)?)\s*\})?\s*(?:" + tuple_re + r")?"
    return _Dialect(
        re.compile(r"\(\s*[\"']?(entity|relationship)[\"']?\s*" + tuple_re, re.I),
        re.compile(closing + r"\s*$"),
        re.compile(closing + r"[ \t]*\n"),
        re.compile(split_re),
        re.compile(r"^[ \t]*(?:\d+\s*[.)]|[-*•])?[ \t]*\((.*" + tuple_re + r".*?)\)?[ \t]*$", re.M),
    )


# a field separator: the tuple delimiter, or one missing its "<" after a closing quote ("...trademark."|>9), or
# `</|>` ("...ratio"</|>8)
_ANGLED = _dialect(_TUPLE, _TUPLE + r"|</\|>|(?<=[\"'])\s*\|>")
_LONE_PIPE = r"(?<![<|])\|(?![>|])"
_PIPE = _dialect(_LONE_PIPE, _LONE_PIPE)
_OPENING_INSIDE = re.compile(r"\(\s*[\"']?(?:entity|relationship)\b", re.I)  # an opening whose delimiter was lost
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass
class Extraction:
    entities: list[dict[str, Any]] = field(default_factory=list)
    relationships: list[dict[str, Any]] = field(default_factory=list)
    unparsed: int = 0
    unparsed_samples: list[str] = field(default_factory=list)

    def add(self, other: Extraction) -> None:
        self.entities += other.entities
        self.relationships += other.relationships
        self.unparsed += other.unparsed
        self.unparsed_samples += other.unparsed_samples[: max(0, 3 - len(self.unparsed_samples))]

    @property
    def records(self) -> int:
        return len(self.entities) + len(self.relationships)


_SPACES = re.compile(r"\s+")


def _clean(value: str) -> str:
    inside = _OPENING_INSIDE.search(value)
    if inside:  # another record's opening, its delimiter lost: never part of this record's text
        value = value[: inside.start()]
    value = value.strip().strip("\"'").strip()
    return _SPACES.sub(" ", value)


def visible_answer(output: str) -> str:
    """The answer without reasoning text: `<think>...</think>` blocks removed (one cut off runs to the end), and
    everything before a lone `</think>` (servers that drop the opening tag)."""
    lower = output.lower()
    if "think>" not in lower:
        return output
    text = _THINK.sub("", output)
    end = text.lower().rfind("</think>")
    return (text[end + len("</think>") :] if end >= 0 else text).strip()


@dataclass
class _Record:
    kind: str
    fields: list[str]
    closed: bool  # it ended with a closing or a delimiter, not where a cut answer stopped
    strength: str | None  # a strength written after the closing bracket: ){10}
    sample: str


def _records(output: str, dialect: _Dialect) -> Iterator[_Record]:
    """Every record of a tuple-format answer, from its opening to the next record's opening (or the end)."""
    text = _straight(visible_answer(output))
    openings = list(dialect.opening.finditer(text))
    for i, opening in enumerate(openings):
        followed = i + 1 < len(openings)
        span = text[opening.end() : openings[i + 1].start() if followed else len(text)]
        for marker in (COMPLETION_DELIMITER, RECORD_DELIMITER):
            at = span.find(marker)
            if at >= 0:
                span, followed = span[:at], True
        span = _NEXT_MARKER.sub("", span).rstrip() if followed else span.rstrip()
        closing = dialect.closing.search(span) or dialect.closing_in_line.search(span)
        body = span[: closing.start()] if closing else span
        yield _Record(
            opening.group(1).lower(),
            [_clean(f) for f in dialect.field_split.split(body)],
            closing is not None or followed,
            closing.group(1) if closing else None,
            text[opening.start() : opening.start() + 120],
        )


def _kindless_records(output: str) -> Iterator[_Record]:
    """Records of an answer with no `"entity"` / `"relationship"` kind at all (a gleaning answered as numbered
    lines): three fields are an entity (name, type, description), four ending in a number a relationship."""
    text = _straight(visible_answer(output)).replace(COMPLETION_DELIMITER, "")
    for line in _ANGLED.kindless.finditer(text):  # ("NAME"<|>TYPE<|>DESC)
        fields = [_clean(f) for f in _ANGLED.field_split.split(line.group(1))]
        kind = "relationship" if len(fields) == 4 and _NUMBER.fullmatch(fields[-1]) else "entity"
        yield _Record(kind, fields, True, None, line.group(0).strip()[:120])


def parse_tuples(output: str) -> Extraction:
    """Parse `("entity"<|>NAME<|>TYPE<|>DESC)` / `("relationship"<|>S<|>T<|>DESC<|>STRENGTH)` records, in any of
    the shapes real models write them (see the module's docstring), or the same with `|` between the fields (our
    own prompt's format). The same record given twice counts once."""
    result = Extraction()
    seen: set[tuple] = set()
    # Microsoft's delimiter first: an answer in it parses as it always has; then our own prompt's single `|`
    records = list(_records(output, _ANGLED)) or list(_records(output, _PIPE))
    if not records:  # no record names its kind: lines of fields, as some gleanings answer
        records = list(_kindless_records(output))
    for record in records:
        fields, kind = record.fields, record.kind
        if (kind, *fields) in seen:
            continue
        seen.add((kind, *fields))
        named = record.closed and all(f and "<|" not in f and "|>" not in f for f in fields[:2])
        if kind == "entity" and named and len(fields) >= 3:
            result.entities.append(
                {"title": fields[0], "type": fields[1].upper(), "description": " ".join(fields[2:]).strip()}
            )
        elif kind == "relationship" and named and len(fields) >= 3 and fields[0] != fields[1]:
            strength, description = record.strength, " ".join(fields[2:]).strip()
            if len(fields) >= 4 and _NUMBER.search(fields[-1]) and len(fields[-1]) <= 12:
                strength, description = fields[-1], " ".join(fields[2:-1]).strip()
            weight = float(_NUMBER.search(strength).group()) if strength and _NUMBER.search(strength) else 1.0
            result.relationships.append(
                {"source": fields[0], "target": fields[1], "description": description, "weight": weight}
            )
        else:
            result.unparsed += 1
            if len(result.unparsed_samples) < 3:
                result.unparsed_samples.append(record.sample)
    return result


@lru_cache(maxsize=8)
def example_names(prompt: str) -> frozenset[str]:
    """The names in a prompt's worked examples (its own records, with no input text filled in), upper-cased: a
    small model that re-prints the prompt copies them (MARTIN SMITH, CENTRAL INSTITUTION). Parsed once per prompt:
    every text unit asks."""
    found = parse_tuples(prompt)
    return frozenset(
        n.upper()
        for n in [e["title"] for e in found.entities]
        + [r[end] for r in found.relationships for end in ("source", "target")]
    )


def without_copies(found: Extraction, examples: frozenset[str], text: str) -> tuple[Extraction, int]:
    """`found` without the records that name an example's entity the text unit never mentions, and how many were
    dropped."""
    lowered = text.lower()
    copied = {name for name in examples if name.lower() not in lowered}
    if not copied:
        return found, 0
    entities = [e for e in found.entities if e["title"].upper() not in copied]
    relationships = [
        r for r in found.relationships if r["source"].upper() not in copied and r["target"].upper() not in copied
    ]
    dropped = found.records - len(entities) - len(relationships)
    return Extraction(entities, relationships, found.unparsed, found.unparsed_samples), dropped


def says_none(output: str) -> bool:
    """The answer says there is nothing (more) to add: the completion marker, and no record opened."""
    text = visible_answer(output)
    text = _straight(text)
    return COMPLETION_DELIMITER in text and not (_ANGLED.opening.search(text) or _PIPE.opening.search(text))


# ----------------------------------------------------------------------------------------- claims
_CLAIM_SPLIT = re.compile(
    re.escape(RECORD_DELIMITER) + r"|\n(?=\s*(?:\d+\s*[.)]|[-*•])?\s*\()"
    r"|(?<=[)>])\s+(?=\d+\s*[.)]\s*\()"
)
_LEADING_MARKER = re.compile(r"^\s*(?:\d+\s*[.)]|[-*•])?\s*\(")


def claim_records(output: str) -> tuple[list[list[str]], int]:
    """The fields of every `(SUBJECT<|>OBJECT<|>TYPE<|>...)` record, and how many opened records did not parse
    (prose around the records is ignored). Split on the record delimiter or on new lines that open a record."""
    text = _straight(visible_answer(output)).replace(COMPLETION_DELIMITER, "")
    records, unparsed = [], 0
    for raw in _CLAIM_SPLIT.split(text):
        opened = _LEADING_MARKER.match(raw)
        if not opened:
            continue
        body = raw[opened.end() :].rstrip()
        closing = _ANGLED.closing.search(body) or _ANGLED.closing_in_line.search(body)
        body = body[: closing.start()] if closing else body
        fields = [f.strip().strip("\"'").strip() for f in _ANGLED.field_split.split(body)]
        if len(fields) < 7 or not fields[0]:
            unparsed += 1
            continue
        records.append(fields)
    return records, unparsed


def claims_say_none(output: str) -> bool:
    text = visible_answer(output)
    return COMPLETION_DELIMITER in text and not claim_records(output)[0] and TUPLE_DELIMITER not in text


def parse_json_object(output: str) -> dict[str, Any] | None:
    """The first JSON object in the output (tolerates reasoning text, code fences and leading prose), or None."""
    text = visible_answer(output).strip()
    if text.startswith("```"):
        text = re.sub(r"^```(?:json)?|```$", "", text, flags=re.M).strip()
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else None
    except ValueError:
        pass
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            value = json.loads(text[start : end + 1])
            return value if isinstance(value, dict) else None
        except ValueError:
            return None
    return None
