"""The request bodies `serve` accepts, validated before anything is asked (as Ray's own OpenAI ingress validates
with pydantic): a body that is not JSON, not an object, of the wrong types, or over a limit is the client's mistake
- a 400 or 413 in the caller's protocol's shape, never a 500 with a traceback.

Limits: the whole body (`serve.max_body_bytes`, read no further than that), every free-text field a client sets
besides the question (`serve.max_field_chars`: model name, response_type...) - a 95 KB response_type would be sent
in every call of a question - and the question itself (`query.max_question_chars`, checked where it is asked).
A client's string is never echoed back longer than a short prefix (`shown`)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from graphrag_ray.errors import GraphRagRayError

SHOWN_CHARS = 60


def shown(text: Any) -> str:
    """A client's string as an error message may quote it: its first SHOWN_CHARS characters, repr'd."""
    text = str(text)
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…") + (
        f" ({len(text):,} characters)" if len(text) > SHOWN_CHARS else ""
    )


class BadRequest(GraphRagRayError):
    """A malformed request body (400)."""


class BodyTooLarge(GraphRagRayError):
    """A body over serve.max_body_bytes (413)."""


class Capped(BaseModel):
    """Free-text fields are capped at the `max_chars` the validation is given (serve.max_field_chars)."""

    model_config = ConfigDict(extra="allow")  # clients send temperature, top_p, user…: accepted, not used

    @field_validator("*", mode="after")
    @classmethod
    def _capped(cls, value: Any, info: ValidationInfo) -> Any:
        limit = (info.context or {}).get("max_chars")
        if limit and info.field_name in CAPPED_FIELDS and isinstance(value, str) and len(value) > limit:
            raise ValueError(f"{len(value):,} characters, over serve.max_field_chars ({limit:,})")
        return value


CAPPED_FIELDS = {"model", "name", "response_type", "role"}


class QueryOptions(Capped):
    """The query settings a request may set (extra body fields in OpenAI's SDK: extra_body; Ollama's options)."""

    response_type: str | None = None
    community_level: int | None = Field(None, ge=0, le=64)
    dynamic_community_selection: bool | None = None


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str = "text"
    text: str | None = None


class Message(Capped):
    role: str
    content: str | list[ContentPart] | None = None


class OpenAIChat(QueryOptions):
    model: str = ""
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None


class OpenAICompletion(QueryOptions):
    """`/v1/completions` (LlamaIndex's OpenAILike default, `is_chat_model=False`): the prompt is the question."""

    model: str = ""
    prompt: str | list[str] = ""
    stream: bool = False
    stream_options: dict[str, Any] | None = None


class ContextRequest(QueryOptions):
    model: str = ""
    messages: list[Message] | None = None
    query: str = ""


class OllamaRequest(QueryOptions):
    """The query settings in Ollama's `options`, or at the top level (as OpenAI clients send them)."""

    model: str = ""
    stream: bool = True  # Ollama streams unless told `"stream": false`
    options: QueryOptions | None = None


class OllamaChat(OllamaRequest):
    messages: list[Message] = Field(min_length=1)


class OllamaGenerate(OllamaRequest):
    prompt: str = ""


class OllamaShow(Capped):
    model: str = ""
    name: str = ""


KINDS: dict[str, type[BaseModel]] = {
    "openai_chat": OpenAIChat,
    "openai_completion": OpenAICompletion,
    "context": ContextRequest,
    "ollama_chat": OllamaChat,
    "ollama_generate": OllamaGenerate,
    "ollama_show": OllamaShow,
}


def parse_body(
    raw: bytes,
    kind: Literal["openai_chat", "openai_completion", "context", "ollama_chat", "ollama_generate", "ollama_show"],
    max_chars: int,
) -> BaseModel:
    """`raw` as the request model `kind`, or BadRequest naming the first problem (field and what is wrong)."""
    try:
        data = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the request body is not JSON ({exc.msg if hasattr(exc, 'msg') else exc})") from None
    if not isinstance(data, dict):
        raise BadRequest(f"the request body must be a JSON object, not {type(data).__name__}")
    try:
        return KINDS[kind].model_validate(data, context={"max_chars": max_chars})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise BadRequest(f"{where}: {first['msg']}") from None


def options_of(body: BaseModel) -> dict:
    """The query settings set by a request, from its top level and (Ollama) its options; top level wins."""
    from graphrag_ray.serve.index_service import OPTIONS

    nested = getattr(body, "options", None)
    top = body.model_dump(include=set(OPTIONS), exclude_none=True)  # unset at the top level: Ollama's options stand
    found = {**(nested.model_dump(exclude_none=True) if nested is not None else {}), **top}
    return {key: found[key] for key in OPTIONS if found.get(key) is not None}


def messages_of(body: BaseModel) -> list[dict]:
    return [m.model_dump(exclude_none=True) for m in body.messages or []]


async def read_body(request, max_bytes: int) -> bytes:
    """The request's body, read no further than `max_bytes` (a Content-Length over it is refused unread)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise BodyTooLarge(f"the request body is {int(declared):,} bytes, over serve.max_body_bytes ({max_bytes:,})")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge(f"the request body is over serve.max_body_bytes ({max_bytes:,} bytes)")
        chunks.append(chunk)
    return b"".join(chunks)
