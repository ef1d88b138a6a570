"""What a model's endpoint accepts in a chat request: defaults per model family, and what its 400s taught.

The engine asks in one logical shape (`max_tokens`, `temperature`, `response_format` json_schema / json_object);
this module turns it into what the endpoint takes. Reasoning models (OpenAI's o-series and GPT-5, DeepSeek-R1 and
deepseek-reasoner, QwQ, ...) take `max_completion_tokens`, refuse any temperature but their default, and count
their reasoning inside the answer budget; DeepSeek's API refuses `response_format: json_schema`. A model released
tomorrow needs no settings: a 400 that names a parameter or value it does not take drops or renames that
parameter once, and the lesson is kept for the process (every later request of that model at that endpoint),
as the limiter keeps the limits a provider announced. The cache key is made from the logical request, so what is
learned never changes which cached answer a request finds.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from graphrag_ray.config.settings import ModelConfig

# model names of reasoning families (the part after a provider prefix such as "openai/" or "deepseek/")
_REASONING = re.compile(
    r"^(o[1-9](-mini|-pro|-preview)?([-.].*)?|gpt-5(?!-chat)([-.].*)?|deepseek-(reasoner|r1).*|"
    r".*-r1(-distill.*)?(:.*)?|qwq.*|magistral.*|.*-thinking.*)$",
    re.I,
)
_NO_JSON_SCHEMA = re.compile(r"^deepseek", re.I)  # DeepSeek's API: json_object yes, json_schema no
_TAKES_NO_TEMPERATURE = re.compile(r"^(o[1-9]|gpt-5(?!-chat))", re.I)  # OpenAI reasoning: the default (1) only
FORMATS = ("json_schema", "json_object", "none")
_PARAMETERS = (
    "max_completion_tokens",
    "max_tokens",
    "temperature",
    "response_format",
    "reasoning_effort",
    "stream_options",
    "top_p",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "dimensions",
    "encoding_format",
    "prompt_cache_key",  # OpenAI's; an endpoint that refuses it learns to go without
)


def _bare_name(model: str) -> str:
    return model.rsplit("/", 1)[-1]


def is_reasoning_model(config: ModelConfig) -> bool:
    """The model entry says so, or its name belongs to a reasoning family."""
    if config.reasoning is not None:
        return config.reasoning
    return bool(_REASONING.match(_bare_name(config.model)))


@dataclass
class RequestShape:
    reasoning: bool
    max_tokens_param: str = "max_tokens"
    send_temperature: bool = True
    response_format: str = "json_schema"  # the richest structured output the endpoint takes
    reasoning_effort: str | None = None
    dropped: set[str] = field(default_factory=set)
    learned: list[str] = field(default_factory=list)  # what 400s taught, for messages and logs

    def wire(self, params: dict[str, Any]) -> dict[str, Any]:
        """The logical request parameters as this endpoint takes them."""
        out = dict(params)
        if "max_tokens" in out and self.max_tokens_param != "max_tokens":
            out[self.max_tokens_param] = out.pop("max_tokens")
        if not self.send_temperature:
            out.pop("temperature", None)
        fmt = out.get("response_format")
        if fmt is not None:
            wanted = FORMATS.index(fmt.get("type", "json_object")) if fmt.get("type") in FORMATS else 1
            allowed = FORMATS.index(self.response_format)
            if allowed > wanted:
                if self.response_format == "none":
                    out.pop("response_format")
                else:
                    out["response_format"] = {"type": "json_object"}
        if self.reasoning and self.reasoning_effort and "reasoning_effort" not in self.dropped:
            out.setdefault("reasoning_effort", self.reasoning_effort)
        for name in self.dropped:
            out.pop(name, None)
        return out

    def learn(self, param: str | None, message: str, sent: dict[str, Any]) -> bool:
        """Adapt to a 400 that refused part of a request (`sent`: the body's parameters). True when something
        changed (the request is worth sending again at once), False when the refusal is about nothing we can
        change."""
        text = message.lower()
        named = param if param in sent else next((p for p in _PARAMETERS if p in sent and p in text), None)
        if named is None and "json_schema" in text and "response_format" in sent:
            named = "response_format"
        if named is None:
            return False
        if named == "max_tokens" and "max_completion_tokens" in text and self.max_tokens_param == "max_tokens":
            self.max_tokens_param = "max_completion_tokens"
            self.learned.append("max_tokens -> max_completion_tokens")
            return True
        if named == "max_completion_tokens" and self.max_tokens_param == "max_completion_tokens":
            self.max_tokens_param = "max_tokens"  # an older server that only knows max_tokens
            self.learned.append("max_completion_tokens -> max_tokens")
            return True
        if named == "temperature" and self.send_temperature:
            self.send_temperature = False
            self.learned.append("temperature not sent")
            return True
        if named == "response_format":
            current = FORMATS.index(self.response_format)
            sent_type = (sent.get("response_format") or {}).get("type")
            current = max(current, FORMATS.index(sent_type) if sent_type in FORMATS else current)
            if current + 1 < len(FORMATS):
                self.response_format = FORMATS[current + 1]
                self.learned.append(f"response_format -> {self.response_format}")
                return True
            return False
        if named in ("messages", "model") or named in self.dropped:
            return False
        self.dropped.add(named)
        self.learned.append(f"{named} not sent")
        return True


_SHAPES: dict[tuple[str, str, str], RequestShape] = {}
_LOCK = threading.Lock()


def shape_for(config: ModelConfig) -> RequestShape:
    """The shape of requests to `config`'s model at its endpoint: the settings' words, else the family's defaults,
    then what its 400s taught (kept for the process: every client of that model shares it)."""
    key = (config.api_base, config.model, config.api_type)
    with _LOCK:
        shape = _SHAPES.get(key)
        if shape is None:
            name = _bare_name(config.model)
            reasoning = is_reasoning_model(config)
            shape = RequestShape(reasoning=reasoning, reasoning_effort=config.reasoning_effort)
            shape.max_tokens_param = config.max_tokens_param or (
                "max_completion_tokens" if _TAKES_NO_TEMPERATURE.match(name) else "max_tokens"
            )
            shape.send_temperature = config.temperature is not None and not _TAKES_NO_TEMPERATURE.match(name)
            shape.response_format = config.response_format or (
                "json_object" if _NO_JSON_SCHEMA.match(name) else "json_schema"
            )
            _SHAPES[key] = shape
        return shape


def forget_shapes() -> None:
    """For tests: start from the settings and families again."""
    with _LOCK:
        _SHAPES.clear()
