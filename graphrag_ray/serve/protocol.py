"""The wire formats: model names, OpenAI chat completions (JSON and server-sent events) and Ollama's chat /
generate / tags replies (JSON and NDJSON). Pure functions of their inputs: the app (serve/app.py) sends them."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.query.methods import multi_methods, served_methods

MULTI = "all"  # `all/global`: every served index at once


def aliases() -> dict[str, str]:
    """The names people copy from the GraphRAG4OpenWebUI pattern (`graphrag-local-search`), and a bare
    "graphrag"."""
    return {f"graphrag-{m}-search": m for m in served_methods()} | {"graphrag": "auto"}


OLLAMA_VERSION = "0.6.3"  # the Ollama API version whose shapes these are


class ModelNotFound(GraphRagRayError):
    """A model name that names no served index or method (404, OpenAI's model_not_found)."""


class Busy(GraphRagRayError):
    """Every replica's queue is full (429 with Retry-After)."""

    def __init__(self, retry_after: int):
        super().__init__(f"the index is busy: every replica's queue is full; retry in {retry_after} s")
        self.retry_after = retry_after

    def __reduce__(self):  # raised in a replica, re-raised in the ingress: rebuilt from its number
        return Busy, (self.retry_after,)


@dataclass(frozen=True)
class Target:
    indexes: tuple[str, ...]
    method: str


def model_names(indexes: list[str]) -> list[str]:
    """Every name /v1/models and /api/tags list: `<index>/<method>`, `all/<global|local>` for several indexes,
    and the bare method names when one index is served."""
    names = [f"{index}/{method}" for index in indexes for method in served_methods()]
    if len(indexes) > 1:
        names += [f"{MULTI}/{method}" for method in sorted(multi_methods()) if method in served_methods()]
    else:
        names += list(served_methods())
    return names


def resolve_model(model: str, indexes: list[str]) -> Target:
    """The indexes and method a model name picks; ModelNotFound (quoting no more than a prefix of the name)."""
    from graphrag_ray.serve.requests import shown

    name = (model or "").strip()
    if ":" in name:  # Ollama's tag (`:latest`)
        name = name.rsplit(":", 1)[0]
    name = aliases().get(name, name)
    if "/" not in name:
        if name in served_methods() and len(indexes) == 1:
            return Target((indexes[0],), name)
        raise ModelNotFound(
            f"model {shown(model)}: name an index and a method, as <index>/<method> (have: "
            f"{', '.join(indexes)}; methods: {', '.join(served_methods())})"
        )
    where, method = name.rsplit("/", 1)
    method = aliases().get(method, method)
    if method not in served_methods():
        raise ModelNotFound(
            f"model {shown(model)}: unknown method {shown(method)} (have: {', '.join(served_methods())})"
        )
    chosen = tuple(indexes) if where == MULTI else tuple(where.split("+"))
    unknown = [i for i in chosen if i not in indexes]
    if unknown:
        raise ModelNotFound(
            f"model {shown(model)}: no index named {shown(unknown[0])} is served (have: {', '.join(indexes)})"
        )
    return Target(chosen, method)


# -- OpenAI ------------------------------------------------------------------------------------------------
def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def usage_of(payload: dict) -> dict:
    prompt, output = payload["usage"]["prompt_tokens"], payload["usage"]["output_tokens"]
    return {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}


def extension(payload: dict, target: Target) -> dict:
    """The `graphrag` field of a reply: which indexes and method answered, the context's ids per table, the
    calls behind the answer and their cost."""
    return {
        "indexes": list(target.indexes),
        "method": payload["method"],
        "sources": payload["sources"],
        "llm_calls": payload["usage"]["llm_calls"],
        "cost": payload["usage"]["cost"],
        "details": payload.get("details", {}),
    }


def chat_completion(payload: dict, model: str, target: Target) -> dict:
    return {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": payload["response"]},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage_of(payload),
        "graphrag": extension(payload, target),
    }


def text_completion(payload: dict, model: str, target: Target) -> dict:
    """`/v1/completions`'s reply (object `text_completion`, the answer in `choices[0].text`)."""
    return {
        "id": completion_id(),
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": payload["response"], "finish_reason": "stop", "logprobs": None}],
        "usage": usage_of(payload),
        "graphrag": extension(payload, target),
    }


def text_chunk(cid: str, model: str, text: str, finish: str | None = None) -> dict:
    return {
        "id": cid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}],
    }


def sse(data: dict | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"


def chunk(cid: str, model: str, delta: dict, finish: str | None = None, **extra) -> dict:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        **extra,
    }


def openai_error(message: str, status: int, code: str | None = None) -> dict:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "invalid_request_error",
        429: "rate_limit_error",
    }.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# -- Ollama ------------------------------------------------------------------------------------------------
def now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def ollama_final(payload: dict, model: str, started: float, chat: bool) -> dict:
    """The last line of an Ollama reply: done, with the counts Ollama reports (durations in nanoseconds)."""
    elapsed = int((time.monotonic() - started) * 1e9)
    body = {
        "model": model,
        "created_at": now_iso(),
        "done": True,
        "done_reason": "stop",
        "total_duration": elapsed,
        "load_duration": 0,
        "prompt_eval_count": payload["usage"]["prompt_tokens"],
        "prompt_eval_duration": 0,
        "eval_count": payload["usage"]["output_tokens"],
        "eval_duration": elapsed,
    }
    if chat:
        body["message"] = {"role": "assistant", "content": ""}
    else:
        body["response"] = ""
    return body


def ollama_piece(text: str, model: str, chat: bool) -> dict:
    body = {"model": model, "created_at": now_iso(), "done": False}
    if chat:
        body["message"] = {"role": "assistant", "content": text}
    else:
        body["response"] = text
    return body


def ollama_tag(name: str, version: str) -> dict:
    """One /api/tags entry: a served index and method as an Ollama model (`:latest` tagged, as Ollama lists)."""
    digest = hashlib.sha256(f"{name}@{version}".encode()).hexdigest()
    return {
        "name": f"{name}:latest",
        "model": f"{name}:latest",
        "modified_at": now_iso(),
        "size": 0,
        "digest": digest,
        "details": {
            "parent_model": "",
            "format": "graphrag",
            "family": "graphrag",
            "families": ["graphrag"],
            "parameter_size": "",
            "quantization_level": "",
        },
    }
