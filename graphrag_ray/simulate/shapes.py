"""How real models and their servers differ from a clean answer, for the simulator to imitate.

Model families (`--model-family`), as their servers behave:
- `openai-reasoning` (o1/o3/o4, GPT-5): 400 with OpenAI's error body for `max_tokens` ("Use
  'max_completion_tokens' instead") and for any temperature but 1; reasoning tokens counted inside the answer budget
  and reported in `usage.completion_tokens_details.reasoning_tokens`; no reasoning text.
- `deepseek-reasoner` (DeepSeek's API, R1): 400 for `response_format: json_schema`; the reasoning comes in
  `reasoning_content` (streamed as its own deltas) and counts in `max_tokens`: a budget spent inside the reasoning
  leaves `content` empty with finish_reason "length".
- `think-tags` (R1 distills and QwQ behind Ollama, llama.cpp or vLLM): the reasoning inside the content, in
  `<think>...</think>`, counted in the completion tokens.

Answer shapes (`--answer-shape`), each one seen in recorded answers of real models; they reshape the simulator's
clean tuple-format answers (graph and claims extraction) or its JSON answers:
closed-gt, strength-braces, numbered, numbered-one-line, bulleted, curly, broken-delimiter, prose-around, twice,
fenced-json, prose-gleaning; and from small local models: copy-example (the prompt's worked example re-printed
before the answer), only-example (the example and nothing else).
"""

from __future__ import annotations

import hashlib
import json
import re

SHAPES = (
    "clean",
    "closed-gt",
    "strength-braces",
    "numbered",
    "numbered-one-line",
    "bulleted",
    "curly",
    "broken-delimiter",
    "prose-around",
    "twice",
    "fenced-json",
    "prose-gleaning",
    "copy-example",
    "only-example",
)
TUPLE, RECORD, COMPLETE = "<|>", "##", "<|COMPLETE|>"
_TUPLE_KINDS = ("extract_graph", "extract_glean", "extract_claims", "extract_claims_glean")
_JSON_KINDS = (
    "community_report",
    "community_report_revision",
    "resolve_entities",
    "json_schema",
    "json",
    "prompt_tune",
)


def refusal(family: str, body: dict) -> tuple[str, str | None, str] | None:
    """(message, param, code) of the 400 this family's server answers to `body`, or None."""
    if family == "openai-reasoning":
        if "max_tokens" in body:
            return (
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            )
        if "temperature" in body and float(body["temperature"]) != 1.0:
            return (
                f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. "
                "Only the default (1) value is supported.",
                "temperature",
                "unsupported_value",
            )
    if family == "deepseek-reasoner" and (body.get("response_format") or {}).get("type") == "json_schema":
        return "This response_format type is unavailable now", None, "invalid_request_error"
    return None


def reasoning_text(family: str, body: dict, tokens: int) -> str:
    """What the model thinks before it answers: about `tokens` tokens, varying with the request (some requests
    think longer than others, as real ones do)."""
    if family == "plain" or tokens <= 0:
        return ""
    digest = int(hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()[:8], 16)
    words = tokens + digest % max(1, tokens)  # " think" is one token: the reasoning is `words` tokens long
    return "Let me think" + " think" * max(0, words - 3)


def in_prompts_delimiter(kind: str, content: str, prompt: str) -> str:
    """An extraction answer written as the prompt's worked example writes its records: with `|` between the fields
    and a record a line (graphrag-ray's prompt), or as given (Microsoft's `<|>` and `##`). A model copies its
    example's format; the responders write Microsoft's. (The other answer shapes replay answers recorded from
    prompts in Microsoft's format, and stay in it.)"""
    if kind not in ("extract_graph", "extract_glean") or '("entity"|' not in prompt:
        return content
    return "\n".join([*(r.replace(TUPLE, "|") for r in _records(content)), COMPLETE])


def _records(content: str) -> list[str]:
    """The records of an answer in Microsoft's format, as the responders write it."""
    return [r.strip() for r in content.replace(COMPLETE, "").split(RECORD) if r.strip()]


def reshape(kind: str, content: str, shape: str, prompt: str = "") -> str:
    """The clean answer `content` of a `kind` request (whose prompt is `prompt`), as a model of `shape` writes
    it."""
    if shape == "clean":
        return content
    if shape in ("copy-example", "only-example"):
        if kind not in ("extract_graph", "extract_glean"):
            return content
        example = prompt.split("-Real Data-")[0].rsplit("Output:", 1)[-1].strip().strip("#").strip()
        if shape == "only-example":
            return example
        answer = in_prompts_delimiter(kind, content, prompt)  # the example re-printed, then the answer in its format
        return f"{example.replace(COMPLETE, '').strip()}\n{RECORD if answer == content else ''}\n{answer}"
    if shape == "fenced-json":
        return f"Here is the report in JSON:\n```json\n{content}\n```" if kind in _JSON_KINDS else content
    if kind not in _TUPLE_KINDS:
        return content
    if shape == "prose-gleaning":
        if kind in ("extract_glean", "extract_claims_glean"):
            return (
                "I apologize for the oversight. However, the text primarily discusses the topics already "
                "covered above, and I could not identify additional entities (or relationships) in it."
            )
        return content
    records = _records(content)
    if not records:
        return content
    if shape not in _RECORD_SHAPES:
        raise ValueError(f"unknown answer shape {shape!r}")
    return _RECORD_SHAPES[shape](records)


def _closed_gt(records: list[str]) -> str:  # deepseek-r1: '>' for ')', or ')<|>'
    out = [r[:-1] + (">" if i % 2 == 0 else ")" + TUPLE) if r.endswith(")") else r for i, r in enumerate(records)]
    return f"  {RECORD}\n".join(out) + f"\n{COMPLETE}"


def _broken_delimiter(records: list[str]) -> str:  # gpt-4o: '"...trademark."|>9)'
    out = []
    for r in records:
        quoted = _quoted(r, '"', '"')
        out.append(
            re.sub(r'"<\|>("?-?\d+(?:\.\d+)?"?\))$', r'"|>\1', quoted) if r.startswith('("relationship"') else quoted
        )
    return f"\n{RECORD}\n".join(out)


def _twice(records: list[str]) -> str:  # a markdown list first, then the same records as tuples
    listed = "\n".join(f"- **{_fields(r)[0]}**: {_fields(r)[-1]}" for r in records)
    return f"### Entities\n{listed}\n\n### Records\n" + f"\n{RECORD}\n".join(records) + f"\n{COMPLETE}"


# the shapes that rewrite an answer's records, by name
_RECORD_SHAPES = {
    "closed-gt": _closed_gt,
    "strength-braces": lambda records: "\n".join(_braced(r) for r in records),  # mistral: strength after ')'
    "numbered": lambda records: "\n".join(f"{i + 1}. {r}" for i, r in enumerate(records)),
    "numbered-one-line": lambda records: " ".join(f"{i + 1}. {r}" if i else r for i, r in enumerate(records)),
    "bulleted": lambda records: "\n".join(f"- {r}" for r in records),
    "curly": lambda records: f"\n{RECORD}\n".join(_quoted(r, "“", "”") for r in records) + f"\n{COMPLETE}",
    "broken-delimiter": _broken_delimiter,
    "prose-around": lambda records: (
        "Here are the entities and relationships I identified in the text:\n\n"
        + f"\n{RECORD}\n".join(records)
        + "\n\nNote: these are all the entities of the requested types (I left out generic terms). Let me "
        "know if you would like more detail."
    ),
    "twice": _twice,
}


def _fields(record: str) -> list[str]:
    return record.strip()[1:-1].split(TUPLE)


def _braced(record: str) -> str:
    fields = _fields(record)
    if record.startswith('("relationship"') and len(fields) >= 5:
        return "(" + TUPLE.join(fields[:-1]) + ")" + "{" + fields[-1].strip() + "}"
    return record


def _quoted(record: str, left: str, right: str) -> str:
    fields = [f.strip().strip('"') for f in _fields(record)]
    return "(" + TUPLE.join(f"{left}{f}{right}" for f in fields) + ")"
