"""The HTTP face of `graphrag-ray serve`: OpenAI's /v1/chat/completions and /v1/models, Ollama's /api/chat,
/api/generate, /api/tags, /api/version, a retrieval-only /v1/context, and /health - over a backend that answers
for each served index (serve/deploy.py: Ray Serve deployments).

Every error is one line in OpenAI's error shape; a full replica queue is 429 with Retry-After; one JSON line per
request is logged (and appended to the request log when one is given). The API key is compared, never logged.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from graphrag_ray.errors import (
    ConfigError,
    EndpointError,
    GraphRagRayError,
    IndexMissingError,
    LLMFatalError,
    LLMUnavailableError,
    UsageError,
)
from graphrag_ray.llm import metrics
from graphrag_ray.query.methods import check_method
from graphrag_ray.serve import protocol
from graphrag_ray.serve.front_ends import DIRECT, mode_prefix, skipped_answer, ui_task
from graphrag_ray.serve.index_service import history_of
from graphrag_ray.serve.protocol import Busy, ModelNotFound, Target
from graphrag_ray.serve.requests import BadRequest, BodyTooLarge, messages_of, options_of, parse_body, read_body, shown

log = logging.getLogger("ray.serve.graphrag")  # under ray.serve: lands in the replica's Serve log
OPEN_PATHS = ("/health",)


class Backend(Protocol):
    indexes: list[str]
    question_chars: dict[str, int]  # each index's query.max_question_chars

    async def info(self, index: str) -> dict: ...

    async def ask(self, target: Target, messages: list[dict], options: dict) -> dict: ...

    def stream(self, target: Target, messages: list[dict], options: dict) -> AsyncIterator[dict]: ...

    async def context(self, target: Target, messages: list[dict], options: dict) -> dict: ...


def original(exc: BaseException) -> BaseException:
    """The exception a replica raised (Ray wraps it; the wrapper's text holds the remote traceback)."""
    return getattr(exc, "cause", None) or exc


def status_of(exc: BaseException) -> tuple[int, str | None]:
    if isinstance(exc, ModelNotFound):
        return 404, "model_not_found"
    if isinstance(exc, BodyTooLarge):
        return 413, "request_too_large"
    if isinstance(exc, (UsageError, ConfigError, BadRequest)):
        return 400, None
    if isinstance(exc, IndexMissingError):
        return 503, "index_unavailable"
    if isinstance(exc, (LLMFatalError, LLMUnavailableError, EndpointError)):
        return 502, "upstream_model_error"
    if isinstance(exc, Busy):
        return 429, "busy"
    return 500, None


def measured(fields: dict) -> None:
    """A question's Ray metrics (Serve counts requests itself; these say which index and method, and what the answer
    cost)."""
    tags = {"index": str(fields.get("index", "")), "method": str(fields.get("method", ""))}
    metrics.count("graphrag_ray_serve_requests", 1, "questions", status=str(fields.get("status")), **tags)
    metrics.observe("graphrag_ray_serve_latency_s", fields.get("latency_s") or 0.0, "seconds per answer", **tags)
    metrics.count("graphrag_ray_serve_llm_calls", fields.get("llm_calls") or 0, "LLM calls of answers", **tags)
    metrics.count("graphrag_ray_serve_cost_usd", fields.get("cost") or 0.0, "USD of answers", **tags)


class RequestLog:
    """One JSON line per request: on the log, and appended to `path` when given."""

    def __init__(self, path: str | None):
        self.path = Path(path) if path else None

    def write(self, **fields: Any) -> None:
        if "index" in fields:  # a question: its Ray metrics, by index and method
            measured(fields)
        line = json.dumps({"event": "request", **fields}, ensure_ascii=False)
        log.info(line)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(line + "\n")


def make_app(
    backend: Backend,
    api_key: str | dict[str, tuple[str, tuple[str, ...]]] | None = None,
    retry_after: int = 2,
    request_log: str | None = None,
    max_body_bytes: int = 1 << 20,
    max_field_chars: int = 200,
    ui_tasks: str = "model",
) -> FastAPI:
    api_key = api_key or os.environ.get("GRAPHRAG_SERVE_API_KEY") or None
    # key -> (its label for the request log, the indexes it sees): one key for every index, or a key per tenant
    keys = api_key if isinstance(api_key, dict) else ({api_key: ("server", tuple(backend.indexes))} if api_key else {})

    def visible(request: Request) -> list[str]:
        """The indexes the request's key sees (every index on an open server)."""
        allowed = getattr(request.state, "indexes", None)
        return [i for i in backend.indexes if allowed is None or i in allowed]

    app = FastAPI(title="graphrag-ray", docs_url=None, redoc_url=None)
    journal = RequestLog(request_log)

    async def body_of(request: Request, kind: str):
        """The request's body as the model `kind` (serve/requests.py): 400 / 413 when it is not one."""
        return parse_body(await read_body(request, max_body_bytes), kind, max_field_chars)

    def checked(request: Request, model: str, messages: list[dict], options: dict, method: str | None = None) -> Target:
        """The target of a question checked here, as the command line checks it before loading anything: a client's
        mistake (no question, too long, a bad level) is refused by the ingress, never raised in a replica.
        `method`: the one a prefix named, instead of the model name's."""
        target = protocol.resolve_model(model, visible(request))
        target = Target(target.indexes, method) if method is not None else target
        question, _ = history_of(messages)
        limits = [backend.question_chars[i] for i in target.indexes if i in backend.question_chars]
        check_method(question, target.method, options.get("community_level"), min(limits, default=None))
        return target

    def routed(request: Request, model: str, messages: list[dict], options: dict) -> tuple[Target, list[dict]]:
        """A front end's background task (to the chat model directly; its first index's), a LightRAG-style
        `/mode` prefix (that method), else the question as the model name routes it (serve/front_ends.py)."""
        task = ui_task(messages)
        if task is not None:
            request.state.ui_task = task
            return Target(protocol.resolve_model(model, visible(request)).indexes[:1], DIRECT), messages
        method, messages = mode_prefix(messages)
        if method == DIRECT:
            target = protocol.resolve_model(model, visible(request))
            if not history_of(messages)[0].strip():
                raise BadRequest("/bypass: no question after it")
            return Target(target.indexes[:1], DIRECT), messages
        return checked(request, model, messages, options, method), messages

    def skipped(request: Request, target: Target) -> dict | None:
        """A background task answered with no call at all (`serve.ui_tasks: skip`): the empty answer its template
        asks for; None when it is to be answered by the model."""
        task = getattr(request.state, "ui_task", None)
        if task is None or ui_tasks != "skip":
            return None
        usage = {"llm_calls": 0, "paid_calls": 0, "prompt_tokens": 0, "output_tokens": 0, "cost": 0.0}
        return {"response": skipped_answer(task), "method": "ui_task", "sources": {}, "usage": usage, "details": {}}

    @app.exception_handler(GraphRagRayError)
    async def known_error(request: Request, exc: GraphRagRayError):
        """Every refusal - the client's mistake, a missing index, a busy queue, a failing model - in the shape of
        the protocol asked (Ollama's on /api/*): a status and one line, no traceback."""
        return error(exc, ollama=request.url.path.startswith("/api/"))

    @app.exception_handler(Exception)
    async def engine_bug(request: Request, exc: Exception):
        """Anything else is ours (a bug): 500 in the same shapes, logged with its traceback."""
        return error(exc, ollama=request.url.path.startswith("/api/"))

    def error(exc: BaseException, ollama: bool = False) -> JSONResponse:
        exc = original(exc)
        status, code = status_of(exc)
        message = str(exc) if isinstance(exc, (GraphRagRayError, Busy)) else f"internal error ({type(exc).__name__})"
        if status == 500:
            log.error("request failed: %s", message, exc_info=exc)
        headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Busy) else None
        body = {"error": message} if ollama else protocol.openai_error(message, status, code)
        return JSONResponse(body, status_code=status, headers=headers)

    @app.middleware("http")
    async def authorise_and_log(request: Request, call_next):
        started = time.monotonic()
        if keys and request.url.path not in OPEN_PATHS:
            given = request.headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            found = next(
                (
                    seen
                    for key, seen in keys.items()
                    if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode())
                ),
                None,
            )
            if found is None:
                journal.write(path=request.url.path, status=401, latency_s=round(time.monotonic() - started, 4))
                return JSONResponse(
                    protocol.openai_error(
                        "missing or wrong API key: send Authorization: Bearer "
                        "<key> (serve.api_key / GRAPHRAG_SERVE_API_KEY)",
                        401,
                        "invalid_api_key",
                    ),
                    status_code=401,
                )
            request.state.key_label, request.state.indexes = found
        response = await call_next(request)
        if not isinstance(response, StreamingResponse) or response.status_code != 200:
            fields = getattr(request.state, "logged", {})
            journal.write(
                path=request.url.path,
                status=response.status_code,
                **fields,
                latency_s=round(time.monotonic() - started, 4),
            )
        return response

    def remember(request: Request, target: Target, payload: dict | None) -> None:
        request.state.logged = {
            "index": "+".join(target.indexes),
            "method": target.method,
            **({"ui_task": request.state.ui_task} if getattr(request.state, "ui_task", None) else {}),
            **({"key": request.state.key_label} if getattr(request.state, "key_label", None) else {}),
            **({"answered_by": payload["method"], **payload["usage"]} if payload else {}),
        }

    def stream_ended(request: Request, target: Target, payload: dict | None, started: float) -> None:
        """A streamed answer's journal line, written when its last byte is (the middleware saw only its start)."""
        remember(request, target, payload)
        journal.write(
            path=request.url.path,
            status=200,
            stream=True,
            **request.state.logged,
            latency_s=round(time.monotonic() - started, 4),
        )

    async def first_of(pieces: AsyncIterator[dict]) -> dict:
        """The first piece of a stream before any byte is sent: a refusal (busy, bad question) is still a status."""
        return await pieces.__anext__()

    # -- OpenAI --------------------------------------------------------------------------------------------
    @app.get("/v1/models")
    async def models(request: Request):
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "graphrag-ray"}
                for name in protocol.model_names(visible(request))
            ],
        }

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await body_of(request, "openai_chat")
        if (body.response_format or {}).get("type", "text") != "text":
            raise BadRequest(
                f"response_format {shown(body.response_format.get('type'))}: not supported - a GraphRAG answer is "
                "prose with citations; leave response_format out, or POST /v1/context for the records as JSON"
            )
        model = body.model
        target, messages = routed(request, model, messages_of(body), options_of(body))
        if (payload := skipped(request, target)) is not None or not body.stream:
            payload = payload or await backend.ask(target, messages, options_of(body))
            remember(request, target, payload)
            return protocol.chat_completion(payload, model, target)
        pieces = backend.stream(target, messages, options_of(body))
        first = await first_of(pieces)
        usage_wanted = bool((body.stream_options or {}).get("include_usage"))
        return StreamingResponse(
            openai_events(request, pieces, first, model, target, usage_wanted), media_type="text/event-stream"
        )

    async def openai_events(request, pieces, first, model, target, usage_wanted):
        cid, started = protocol.completion_id(), time.monotonic()
        yield protocol.sse(protocol.chunk(cid, model, {"role": "assistant", "content": ""}))
        payload = None
        try:
            piece = first
            while True:
                if "delta" in piece:
                    yield protocol.sse(protocol.chunk(cid, model, {"content": piece["delta"]}))
                else:
                    payload = piece["done"]
                    break
                piece = await pieces.__anext__()
            yield protocol.sse(protocol.chunk(cid, model, {}, "stop", graphrag=protocol.extension(payload, target)))
            if usage_wanted:
                yield protocol.sse(
                    {
                        "id": cid,
                        "object": "chat.completion.chunk",
                        "created": int(time.time()),
                        "model": model,
                        "choices": [],
                        "usage": protocol.usage_of(payload),
                    }
                )
        except Exception as exc:  # noqa: BLE001 - a stream cut mid-answer says why, in the stream
            status, code = status_of(original(exc))
            yield protocol.sse(protocol.openai_error(str(original(exc)), status, code))
        yield protocol.sse("[DONE]")
        stream_ended(request, target, payload, started)

    @app.post("/v1/completions")
    async def completions(request: Request):
        """The legacy completions endpoint (LlamaIndex's OpenAILike with is_chat_model=False): the prompt is the
        question; the answer is `choices[0].text`."""
        body = await body_of(request, "openai_completion")
        prompt = body.prompt if isinstance(body.prompt, str) else "\n".join(body.prompt)
        model = body.model
        target, messages = routed(request, model, [{"role": "user", "content": prompt}], options_of(body))
        if body.stream:
            pieces = backend.stream(target, messages, options_of(body))
            first = await first_of(pieces)
            return StreamingResponse(text_events(request, pieces, first, model, target), media_type="text/event-stream")
        payload = skipped(request, target) or await backend.ask(target, messages, options_of(body))
        remember(request, target, payload)
        return protocol.text_completion(payload, model, target)

    async def text_events(request, pieces, first, model, target):
        cid, started, payload = protocol.completion_id(), time.monotonic(), None
        try:
            piece = first
            while "delta" in piece:
                yield protocol.sse(protocol.text_chunk(cid, model, piece["delta"]))
                piece = await pieces.__anext__()
            payload = piece["done"]
            yield protocol.sse(protocol.text_chunk(cid, model, "", "stop"))
        except Exception as exc:  # noqa: BLE001 - a stream cut mid-answer says why, in the stream
            status, code = status_of(original(exc))
            yield protocol.sse(protocol.openai_error(str(original(exc)), status, code))
        yield protocol.sse("[DONE]")
        stream_ended(request, target, payload, started)

    @app.post("/v1/context")
    async def context(request: Request):
        """Retrieval only: the context (entities, relationships, reports, sources...) with no answer call."""
        body = await body_of(request, "context")
        messages = messages_of(body) or [{"role": "user", "content": body.query}]
        target = checked(request, body.model, messages, options_of(body))
        payload = await backend.context(target, messages, options_of(body))
        remember(request, target, payload)
        return {
            "model": body.model,
            "indexes": list(target.indexes),
            "method": payload["method"],
            "context": payload["context"],
            "context_text": payload["context_text"],
            "usage": payload["usage"],
            "details": payload["details"],
        }

    @app.get("/health")
    async def health():
        try:
            versions = {i: (await backend.info(i))["version"] for i in backend.indexes}
            # with keys, a probe (no key) learns that the server is up, not which indexes it holds
            return {"status": "ok", "indexes": len(versions) if keys else versions}
        except Exception as exc:  # noqa: BLE001 - unhealthy is a status, not a traceback
            return JSONResponse({"status": "unavailable", "error": str(original(exc)).splitlines()[0]}, status_code=503)

    # -- Ollama --------------------------------------------------------------------------------------------
    @app.get("/api/version")
    async def ollama_version():
        return {"version": protocol.OLLAMA_VERSION}

    @app.get("/api/tags")
    async def ollama_tags(request: Request):
        seen = visible(request)
        versions = {i: (await backend.info(i))["version"] for i in seen}
        return {
            "models": [
                protocol.ollama_tag(name, versions.get(name.split("/")[0], "")) for name in protocol.model_names(seen)
            ]
        }

    @app.get("/api/ps")
    async def ollama_ps():
        return {"models": []}

    @app.post("/api/show")
    async def ollama_show(request: Request):
        body = await body_of(request, "ollama_show")
        name = body.model or body.name
        target = protocol.resolve_model(name, visible(request))
        return {
            "modelfile": "",
            "parameters": "",
            "template": "",
            "capabilities": ["completion"],
            "details": protocol.ollama_tag(name.split(":")[0], "")["details"],
            "model_info": {"graphrag.indexes": list(target.indexes), "graphrag.method": target.method},
        }

    @app.post("/api/chat")
    async def ollama_chat(request: Request):
        body = await body_of(request, "ollama_chat")
        return await ollama_reply(request, body, messages_of(body), chat=True)

    @app.post("/api/generate")
    async def ollama_generate(request: Request):
        body = await body_of(request, "ollama_generate")
        return await ollama_reply(request, body, [{"role": "user", "content": body.prompt}], chat=False)

    async def ollama_reply(request: Request, body, messages: list[dict], chat: bool):
        model, started = body.model, time.monotonic()
        target, messages = routed(request, model, messages, options_of(body))
        if (payload := skipped(request, target)) is not None or not body.stream:
            payload = payload or await backend.ask(target, messages, options_of(body))
            remember(request, target, payload)
            reply = protocol.ollama_final(payload, model, started, chat)
            reply["message" if chat else "response"] = (
                {"role": "assistant", "content": payload["response"]} if chat else payload["response"]
            )
            reply["graphrag"] = protocol.extension(payload, target)
            return reply
        pieces = backend.stream(target, messages, options_of(body))
        first = await first_of(pieces)
        return StreamingResponse(
            ollama_lines(request, pieces, first, model, target, started, chat), media_type="application/x-ndjson"
        )

    async def ollama_lines(request, pieces, first, model, target, started, chat):
        payload = None
        try:
            piece = first
            while "delta" in piece:
                yield json.dumps(protocol.ollama_piece(piece["delta"], model, chat), ensure_ascii=False) + "\n"
                piece = await pieces.__anext__()
            payload = piece["done"]
            final = protocol.ollama_final(payload, model, started, chat)
            final["graphrag"] = protocol.extension(payload, target)
            yield json.dumps(final, ensure_ascii=False) + "\n"
        except Exception as exc:  # noqa: BLE001 - as Ollama does: an error line ends the stream
            yield json.dumps({"error": str(original(exc))}) + "\n"
        stream_ended(request, target, payload, started)

    return app
