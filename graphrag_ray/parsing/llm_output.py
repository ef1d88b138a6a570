"""Tolerant parsers for LLM output. They never raise: what they cannot use is counted and returned."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

TUPLE_DELIMITER = "<|>"
RECORD_DELIMITER = "##"
COMPLETION_DELIMITER = "<|COMPLETE|>"

_RECORD = re.compile(r"\(\s*[\"']?(entity|relationship)[\"']?\s*" + re.escape(TUPLE_DELIMITER) + r"(.*?)\)\s*$",
                     re.S | re.I)


@dataclass
class Extraction:
    entities: list[dict[str, Any]] = field(default_factory=list)
    relationships: list[dict[str, Any]] = field(default_factory=list)
    unparsed: int = 0
    unparsed_samples: list[str] = field(default_factory=list)

    def add(self, other: "Extraction") -> None:
        self.entities += other.entities
        self.relationships += other.relationships
        self.unparsed += other.unparsed
        self.unparsed_samples += other.unparsed_samples[: max(0, 3 - len(self.unparsed_samples))]


_SPACES = re.compile(r"\s+")


def _clean(value: str) -> str:
    value = value.strip().strip("\"'").strip()
    return _SPACES.sub(" ", value)


def looks_complete(output: str) -> bool:
    """A whole answer ends with the completion marker or a closed record; a truncated one does not."""
    tail = output.rstrip()
    return tail.endswith(COMPLETION_DELIMITER) or tail.endswith(")") or tail == ""


def usable_extraction(output: str) -> bool:
    """An extraction answer worth keeping: whole, or holding at least one record (a model that drops the
    completion marker or adds a sentence after its records still gave them)."""
    return looks_complete(output) or bool(_RECORD.search(output.split(RECORD_DELIMITER)[0].strip())) or \
        any(_RECORD.search(part.strip()) for part in output.split(RECORD_DELIMITER)[1:])


def parse_tuples(output: str) -> Extraction:
    """Parse `("entity"<|>NAME<|>TYPE<|>DESC)` / `("relationship"<|>S<|>T<|>DESC<|>STRENGTH)` records."""
    result = Extraction()
    text = output.replace(COMPLETION_DELIMITER, "")
    for raw in re.split(re.escape(RECORD_DELIMITER) + r"|\n(?=\s*\()", text):
        record = raw.strip()
        if not record:
            continue
        match = _RECORD.search(record)
        fields = [_clean(f) for f in match.group(2).split(TUPLE_DELIMITER)] if match else []
        kind = match.group(1).lower() if match else ""
        if any("<|" in f or "|>" in f for f in fields[:2]):  # a name carrying delimiters is not a name
            fields = []
        if kind == "entity" and len(fields) >= 3 and fields[0]:
            result.entities.append({"title": fields[0], "type": fields[1].upper(),
                                    "description": " ".join(fields[2:]).strip()})
        elif kind == "relationship" and len(fields) >= 3 and fields[0] and fields[1] and fields[0] != fields[1]:
            strength = 1.0
            description = fields[2]
            if len(fields) >= 4:
                try:
                    strength = float(re.findall(r"-?\d+(?:\.\d+)?", fields[-1])[0])
                    description = " ".join(fields[2:-1]).strip()
                except IndexError:
                    description = " ".join(fields[2:]).strip()
            result.relationships.append({"source": fields[0], "target": fields[1], "description": description,
                                         "weight": strength})
        else:
            result.unparsed += 1
            if len(result.unparsed_samples) < 3:
                result.unparsed_samples.append(record[:120])
    return result


def parse_json_object(output: str) -> dict[str, Any] | None:
    """The first JSON object in the output (tolerates code fences and leading prose), or None."""
    text = output.strip()
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
            value = json.loads(text[start:end + 1])
            return value if isinstance(value, dict) else None
        except ValueError:
            return None
    return None
