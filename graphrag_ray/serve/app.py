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
from pathlib import Path
from typing import Any, AsyncIterator, Protocol

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
from graphrag_ray.serve import protocol
from graphrag_ray.serve.index_service import OPTIONS
from graphrag_ray.serve.protocol import Busy, ModelNotFound, Target

log = logging.getLogger("ray.serve.graphrag")  # under ray.serve: lands in the replica's Serve log
OPEN_PATHS = ("/health",)


class Backend(Protocol):
    indexes: list[str]

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
    if isinstance(exc, (UsageError, ConfigError)):
        return 400, None
    if isinstance(exc, IndexMissingError):
        return 503, "index_unavailable"
    if isinstance(exc, (LLMFatalError, LLMUnavailableError, EndpointError)):
        return 502, "upstream_model_error"
    if isinstance(exc, Busy):
        return 429, "busy"
    return 500, None


def options_of(body: dict) -> dict:
    """The query settings a request may set, as extra body fields (OpenAI SDK: extra_body) or Ollama options."""
    found = {**(body.get("options") or {}), **body}
    return {key: found[key] for key in OPTIONS if found.get(key) is not None}


class RequestLog:
    """One JSON line per request: on the log, and appended to `path` when given."""

    def __init__(self, path: str | None):
        self.path = Path(path) if path else None

    def write(self, **fields: Any) -> None:
        line = json.dumps({"event": "request", **fields}, ensure_ascii=False)
        log.info(line)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(line + "\n")


def make_app(
    backend: Backend, api_key: str | None = None, retry_after: int = 2, request_log: str | None = None
) -> FastAPI:
    api_key = api_key or os.environ.get("GRAPHRAG_SERVE_API_KEY") or None
    app = FastAPI(title="graphrag-ray", docs_url=None, redoc_url=None)
    journal = RequestLog(request_log)

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
        if api_key and request.url.path not in OPEN_PATHS:
            given = request.headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), api_key.encode()):
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
    async def models():
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "graphrag-ray"}
                for name in protocol.model_names(backend.indexes)
            ],
        }

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await request.json()
        model = body.get("model", "")
        try:
            target = protocol.resolve_model(model, backend.indexes)
            messages = body.get("messages") or []
            if not body.get("stream"):
                payload = await backend.ask(target, messages, options_of(body))
                remember(request, target, payload)
                return protocol.chat_completion(payload, model, target)
            pieces = backend.stream(target, messages, options_of(body))
            first = await first_of(pieces)
        except Exception as exc:  # noqa: BLE001 - every failure is an OpenAI-shaped reply
            return error(exc)
        usage_wanted = bool((body.get("stream_options") or {}).get("include_usage"))
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

    @app.post("/v1/context")
    async def context(request: Request):
        """Retrieval only: the context (entities, relationships, reports, sources...) with no answer call."""
        body = await request.json()
        try:
            target = protocol.resolve_model(body.get("model", ""), backend.indexes)
            messages = body.get("messages") or [{"role": "user", "content": body.get("query", "")}]
            payload = await backend.context(target, messages, options_of(body))
        except Exception as exc:  # noqa: BLE001 - as above
            return error(exc)
        remember(request, target, payload)
        return {
            "model": body.get("model"),
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
            return {"status": "ok", "indexes": {i: (await backend.info(i))["version"] for i in backend.indexes}}
        except Exception as exc:  # noqa: BLE001 - unhealthy is a status, not a traceback
            return JSONResponse({"status": "unavailable", "error": str(original(exc)).splitlines()[0]}, status_code=503)

    # -- Ollama --------------------------------------------------------------------------------------------
    @app.get("/api/version")
    async def ollama_version():
        return {"version": protocol.OLLAMA_VERSION}

    @app.get("/api/tags")
    async def ollama_tags():
        versions = {i: (await backend.info(i))["version"] for i in backend.indexes}
        return {
            "models": [
                protocol.ollama_tag(name, versions.get(name.split("/")[0], ""))
                for name in protocol.model_names(backend.indexes)
            ]
        }

    @app.get("/api/ps")
    async def ollama_ps():
        return {"models": []}

    @app.post("/api/show")
    async def ollama_show(request: Request):
        body = await request.json()
        name = body.get("model") or body.get("name") or ""
        try:
            target = protocol.resolve_model(name, backend.indexes)
        except Exception as exc:  # noqa: BLE001
            return error(exc, ollama=True)
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
        body = await request.json()
        return await ollama_reply(request, body, body.get("messages") or [], chat=True)

    @app.post("/api/generate")
    async def ollama_generate(request: Request):
        body = await request.json()
        return await ollama_reply(request, body, [{"role": "user", "content": body.get("prompt", "")}], chat=False)

    async def ollama_reply(request: Request, body: dict, messages: list[dict], chat: bool):
        model, started = body.get("model", ""), time.monotonic()
        try:
            target = protocol.resolve_model(model, backend.indexes)
            if body.get("stream") is False:
                payload = await backend.ask(target, messages, options_of(body))
                remember(request, target, payload)
                reply = protocol.ollama_final(payload, model, started, chat)
                reply["message" if chat else "response"] = (
                    {"role": "assistant", "content": payload["response"]} if chat else payload["response"]
                )
                reply["graphrag"] = protocol.extension(payload, target)
                return reply
            pieces = backend.stream(target, messages, options_of(body))
            first = await first_of(pieces)
        except Exception as exc:  # noqa: BLE001 - Ollama's error shape: {"error": "..."}
            return error(exc, ollama=True)
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
