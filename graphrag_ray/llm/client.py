"""Innermost layer: one request to the model's endpoint, errors sorted into retryable and fatal.

An OpenAI-compatible endpoint is spoken to directly (http.py: JSON over one keep-alive session, server-sent events
for streams) - the openai SDK is never imported for it. Azure OpenAI goes through the SDK, with its own retries off
(max_retries=0): tenacity in retry.py is the only retry loop. A command answered from the cache or without an LLM
opens no session at all.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import binascii
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from graphrag_ray.config.settings import ModelConfig
from graphrag_ray.errors import LLMFatalError
from graphrag_ray.llm import in_flight
from graphrag_ray.llm.http import (
    NoAnswer,
    encode,
    header_int,
    network_cause,
    open_session,
    openai_headers,
    retry_after_seconds,
    server_sent_events,
    ssl_context,
)
from graphrag_ray.llm.outcomes import (
    Completion,
    CutStreamError,
    RateLimitedError,
    RequestRejected,
    StalledError,
    TimedOutError,
    TransientLLMError,
    completion_of,
)
from graphrag_ray.llm.prices import cached_tokens_of
from graphrag_ray.llm.reasoning import ThinkFilter, reasoning_tokens_of
from graphrag_ray.llm.request_shape import RequestShape, shape_for
from graphrag_ray.secrets import redact

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


CUTS_BEFORE_WHOLE_ANSWERS = 2  # an endpoint that cuts this many streams is asked for whole answers from then on


PROGRESS_CHECK_S = 1.0


# Clients not yet closed. Their owners (the models that opened them, models.py) close them before their loop ends;
# this is only for the exit hook below, and holds them (a session collected unclosed prints its warning then).
_UNCLOSED: set[OpenAIClient] = set()


def _close_abandoned_clients() -> None:
    """At exit: clients whose event loop ended before they were closed. A stream left with a bare `break` is
    finalised while asyncio.run shuts its loop down, and the close it awaits may be cancelled or never run; the
    session would then print "Unclosed client session" at exit. Its connections ended with the loop: closing it
    on a new loop only marks it closed."""
    leftover = [client for client in list(_UNCLOSED) if not client.closed]
    _UNCLOSED.clear()
    if not leftover:
        return

    async def close_all() -> None:
        for client in leftover:
            try:
                await client.close()
            except Exception:  # noqa: BLE001 - at exit, a client that cannot close has nothing left to lose
                pass

    try:
        asyncio.run(close_all())
    except Exception:  # noqa: BLE001 - as above
        pass


atexit.register(_close_abandoned_clients)


class OpenAIClient:
    """Async chat completions (plain, streaming, JSON) and embeddings for one model entry."""

    def __init__(self, model_id: str, config: ModelConfig):
        self.model_id = model_id
        self.config = config
        self.closed = False
        self.announced_limits: tuple[int | None, int | None] = (None, None)
        self.cuts = 0  # streams this endpoint cut short
        self.shape: RequestShape = shape_for(config)
        self._endpoint = (config.api_base, config.model)
        self.streams = config.api_type == "openai" and (
            config.stream_requests == "always"
            or (config.stream_requests == "auto" and config.api_base.lower().startswith("http://"))
        )
        key = config.api_key.get_secret_value() if config.api_key else ""
        if not key:
            raise LLMFatalError(
                f"models.{model_id}.api_key is empty: set it (e.g. api_key: ${{GRAPHRAG_API_KEY}} "
                "and export GRAPHRAG_API_KEY)"
            )
        self._sdk = None
        if config.api_type == "azure":
            import openai

            transport = (
                openai.DefaultAioHttpClient if config.http_client == "aiohttp" else openai.DefaultAsyncHttpxClient
            )
            self._sdk = openai.AsyncAzureOpenAI(
                azure_endpoint=config.api_base,
                api_version=config.api_version,
                api_key=key,
                max_retries=0,
                timeout=config.request_timeout,
                http_client=transport(timeout=config.request_timeout, verify=ssl_context()),
            )
        else:
            self._http = open_session(config.http_client, config.request_timeout, config.api_base)
            self._base = config.api_base.rstrip("/")
            self._headers = openai_headers(key)
        _UNCLOSED.add(self)

    @property
    def where(self) -> str:
        return f"model '{self.config.model}' ({self.model_id}) at {self.config.api_base}"

    def _body(self, messages: list[dict], params: dict[str, Any], **more: Any) -> dict[str, Any]:
        return {"model": self.config.model, "messages": messages, **params, **more}

    async def chat(self, messages: list[dict], params: dict[str, Any], received: list[str] | None = None) -> Completion:
        """POST /chat/completions in the shape this endpoint takes, read as plain JSON - or, for an endpoint that
        streams (`stream_requests`), asked for as a stream and put together here, so a slow server is judged by its
        progress, not by the total time a long answer takes to generate."""
        if self.streams:
            usage: dict[str, Any] = {}
            pieces = received if received is not None else []  # the caller sees what came, if it is stopped
            async with contextlib.aclosing(self.chat_stream(messages, params, usage)) as stream:
                async for piece in stream:
                    pieces.append(piece)
            content = "".join(pieces)
            return Completion(
                content,
                usage.get("prompt_tokens", 0),
                usage.get("completion_tokens", 0),
                usage.get("finish_reason"),
                reasoning_tokens=usage.get("reasoning_tokens", 0),
                reasoning=usage.get("reasoning", ""),
                cached_tokens=usage.get("cached_tokens", 0),
            )
        data = await self._shaped(lambda wire: self._post_json("/chat/completions", self._body(messages, wire)), params)
        return completion_of(data)

    def batch_body(self, messages: list[dict], params: dict[str, Any]) -> dict[str, Any]:
        """The body of this request as a Batch API line carries it: in the shape this endpoint takes, not streamed."""
        return self._body(messages, self.shape.wire(params))

    async def _shaped(self, send, params: dict[str, Any]):
        """`send(wire params)`, and again at once each time a 400 names a parameter the shape can drop or rename
        (learned for every later request of this model)."""
        for _ in range(len(params) + 4):
            wire = self.shape.wire(params)
            try:
                return await send(wire)
            except RequestRejected as exc:
                if self.shape.wire(params) != wire:
                    continue  # another request, refused the same way meanwhile, has taught the shape already
                if not self.shape.learn(exc.param, exc.detail, wire):
                    raise
                log.warning(
                    "%s refused %s; learned: %s", self.where, exc.param or "a parameter", self.shape.learned[-1]
                )
        raise LLMFatalError(
            f"{self.where}: the request was refused in every shape tried ({'; '.join(self.shape.learned)})"
        )

    async def _post_json(self, path: str, body: dict[str, Any]) -> dict:
        """One POST of a JSON body; the answer's JSON object."""
        token = in_flight.begin(self.where, self._endpoint)
        try:
            if self._sdk is not None:
                import httpx2

                response = await self._sdk.post(path, body=body, cast_to=httpx2.Response)
                headers, data = response.headers, response.json()
            else:
                reply = await self._http.request("POST", self._base + path, self._headers, encode(body))
                if reply.status >= 400:
                    raise self._from_status(reply.status, reply.headers, reply.error_text(), reply.error_param())
                headers, data = reply.headers, reply.json()
            self._note_limits(headers)
        except ValueError:
            raise TransientLLMError(f"{self.where} sent an answer that is not JSON") from None
        except (TransientLLMError, LLMFatalError):
            raise
        except Exception as exc:
            raise self._translate(exc) from None
        finally:
            in_flight.end(token)
        if not isinstance(data, dict):
            raise TransientLLMError(f"{self.where} sent an answer that is not a JSON object")
        return data

    async def chat_stream(
        self, messages: list[dict], params: dict[str, Any], usage_out: dict[str, Any]
    ) -> AsyncIterator[str]:
        """Yield the answer's text deltas (reasoning left out); fills usage_out with prompt / completion / reasoning
        tokens from the final chunk."""
        thinking = ThinkFilter()
        token = in_flight.begin(self.where, self._endpoint)
        try:
            chunks = await self._shaped(
                lambda wire: self._opened_stream(self._body(messages, wire, stream=True)),
                {**params, "stream_options": {"include_usage": True}},
            )
            async with contextlib.aclosing(chunks):  # left early or failed: closed here, in this task, at once
                async for chunk in chunks:
                    if chunk.get("error"):  # an error sent inside the stream, after its 200
                        raise TransientLLMError(
                            f"the stream from {self.where} ended with an error: {redact(str(chunk['error'])[:200])}"
                        )
                    if usage := chunk.get("usage"):
                        usage_out["prompt_tokens"] = usage.get("prompt_tokens") or 0
                        usage_out["completion_tokens"] = usage.get("completion_tokens") or 0
                        usage_out["reasoning_tokens"] = reasoning_tokens_of(usage)
                        usage_out["cached_tokens"] = cached_tokens_of(usage)
                    for choice in chunk.get("choices") or []:
                        if choice.get("finish_reason"):
                            usage_out["finish_reason"] = choice["finish_reason"]
                        delta = choice.get("delta") or {}
                        if reasoning := delta.get("reasoning_content") or delta.get("reasoning"):
                            thinking.reasoning.append(str(reasoning))
                        if text := thinking.feed(str(delta.get("content") or "")):
                            yield text
            if "finish_reason" not in usage_out:
                raise self._cut()
            if rest := thinking.flush():
                yield rest
            usage_out["reasoning"] = "".join(thinking.reasoning)
        except (TransientLLMError, LLMFatalError):
            raise
        except ValueError:
            raise TransientLLMError(f"{self.where} sent a stream event that is not JSON") from None
        except Exception as exc:
            raise self._translate(exc) from None
        finally:
            in_flight.end(token)

    def _cut(self) -> CutStreamError:
        """A cut stream: after a few, this client asks for whole answers (a server that cuts streams finishes
        the requests it answers in one piece)."""
        self.cuts += 1
        if self.cuts == CUTS_BEFORE_WHOLE_ANSWERS and self.streams:
            self.streams = False
            log.warning(
                "%s ended %d streams with no finish_reason (cut short: llama.cpp's server does so when another "
                "request waits, see docs/llm.md): asking for whole answers from now on",
                self.where,
                self.cuts,
            )
        return CutStreamError(f"the stream from {self.where} ended with no finish_reason (cut short)")

    async def _opened_stream(self, body: dict[str, Any]) -> AsyncIterator[dict]:
        """The stream's events, its first one already read: a refusal (400) is raised here, before any text. The
        stream is given up only when its endpoint stalls (`_watch`)."""
        events = self._sdk_stream(body) if self._sdk is not None else self._direct_stream(body)
        reader = [asyncio.current_task()]  # the task to stop on a stall (the one reading, as it changes)
        stalled: list[bool] = []
        prompt_tokens = sum(len(str(m.get("content") or "")) for m in body.get("messages") or []) // 3
        sent = time.monotonic()
        reading = [in_flight.prefill_patience(self._endpoint, prompt_tokens)]  # patience for the prompt's reading
        watchdog = asyncio.ensure_future(self._watch(reader, sent, stalled, reading))
        try:
            first = await events.__anext__()
        except StopAsyncIteration:
            first = None
        except asyncio.CancelledError:
            watchdog.cancel()
            if stalled:
                raise self._stall_error(reader[0]) from None
            raise
        except BaseException:
            watchdog.cancel()
            await events.aclose()
            raise
        in_flight.progressed(self._endpoint)
        in_flight.first_byte_after(self._endpoint, time.monotonic() - sent, prompt_tokens)
        reading[0] = 0.0  # read: from here on, a silence is a stall

        async def rest() -> AsyncIterator[dict]:
            try:
                if first is None:
                    return
                yield first
                reader[0] = asyncio.current_task()  # the task reading on may not be the one that opened it
                async for event in events:
                    in_flight.progressed(self._endpoint)
                    yield event
            except asyncio.CancelledError:
                if stalled:
                    raise self._stall_error(reader[0]) from None
                raise
            finally:
                watchdog.cancel()
                await events.aclose()  # the connection's reader, closed in the task that read it

        return rest()

    async def _watch(self, reader: list, started: float, stalled: list, reading: list[float]) -> None:
        """Cancel `reader` once this endpoint has sent this process nothing - for this request or any other -
        for stall_timeout seconds (plus, before this request's first byte, `reading[0]`: the time its prompt takes
        to read). A serial local server answering other requests first is making progress, so the requests queued
        behind them wait, and are never sent twice. One watchdog per request (not a wait per piece: a stream has
        hundreds of pieces)."""
        stall = self.config.stall_timeout
        while True:
            await asyncio.sleep(min(PROGRESS_CHECK_S, stall))
            if time.monotonic() - max(in_flight.last_progress(self._endpoint), started) > stall + reading[0]:
                stalled.append(True)
                reader[0].cancel()
                return

    def _stall_error(self, reader: asyncio.Task) -> StalledError:
        """The stall, raised instead of the cancellation that stopped the read (which is taken back)."""
        reader.uncancel()
        return StalledError(f"no answer for {self.config.stall_timeout:g}s from {self.where} (stall_timeout)")

    async def _direct_stream(self, body: dict[str, Any]) -> AsyncIterator[dict]:
        async with self._http.stream(self._base + "/chat/completions", self._headers, encode(body)) as (reply, lines):
            if reply.status >= 400:
                raise self._from_status(reply.status, reply.headers, reply.error_text(), reply.error_param())
            self._note_limits(reply.headers)
            async with contextlib.aclosing(lines), contextlib.aclosing(server_sent_events(lines)) as events:
                async for event in events:
                    yield event

    async def _sdk_stream(self, body: dict[str, Any]) -> AsyncIterator[dict]:
        import openai
        from openai.types.chat.chat_completion import ChatCompletion
        from openai.types.chat.chat_completion_chunk import ChatCompletionChunk

        stream = await self._sdk.post(
            "/chat/completions",
            cast_to=ChatCompletion,
            body=body,
            stream=True,
            stream_cls=openai.AsyncStream[ChatCompletionChunk],
        )
        self._note_limits(stream.response.headers)
        async for chunk in stream:
            yield chunk.model_dump()

    async def embed(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """A float32 matrix, one row per text, and the prompt tokens used. The vectors are asked for as base64
        float32 (as the SDK does) and decoded straight into the matrix: no Python float per number."""
        import numpy as np

        params: dict[str, Any] = {"encoding_format": "base64"}
        if self.config.dimensions:
            params["dimensions"] = self.config.dimensions
        data = await self._shaped(
            lambda wire: self._post_json("/embeddings", {"model": self.config.model, "input": texts, **wire}), params
        )
        try:
            items = sorted(data["data"], key=lambda d: d.get("index", 0))
            rows = [
                np.frombuffer(base64.b64decode(item["embedding"]), dtype=np.float32)
                if isinstance(item["embedding"], str)
                else np.asarray(item["embedding"], dtype=np.float32)
                for item in items
            ]  # a server that ignores encoding_format sends floats
            matrix = np.vstack(rows) if rows else np.zeros((0, 0), dtype=np.float32)
        except (KeyError, TypeError, ValueError, binascii.Error):
            raise TransientLLMError(f"{self.where} sent an embedding answer in an unknown shape") from None
        if matrix.shape[0] != len(texts):
            raise TransientLLMError(f"{self.where} sent {matrix.shape[0]} vectors for {len(texts)} texts")
        return matrix, (data.get("usage") or {}).get("prompt_tokens") or 0

    def _note_limits(self, headers: Any) -> None:
        """The requests / tokens per minute the provider says this key may use (None where it does not say)."""
        self.announced_limits = (
            header_int(headers, "x-ratelimit-limit-requests"),
            header_int(headers, "x-ratelimit-limit-tokens"),
        )

    def _translate(self, exc: Exception) -> Exception:
        """A failed request's exception (no answer, or the SDK's) as ours: retryable (TransientLLMError,
        RateLimitedError) or fatal (LLMFatalError); anything else is returned as it is."""
        openai = sys.modules.get("openai")  # only Azure clients load the SDK
        if openai is not None and isinstance(exc, openai.APIStatusError):
            return self._from_status(
                exc.status_code, exc.response.headers, str(getattr(exc, "message", exc)), getattr(exc, "param", None)
            )
        sdk_timeout = openai is not None and isinstance(exc, openai.APITimeoutError)
        sdk_failed = openai is not None and isinstance(exc, openai.APIConnectionError)
        if isinstance(exc, NoAnswer) or sdk_timeout or sdk_failed:
            timeout = sdk_timeout or (isinstance(exc, NoAnswer) and exc.timeout)
            if cause := network_cause(exc):
                return TransientLLMError(f"connection to {self.where} failed: {cause}")
            if timeout:
                return TimedOutError(f"timeout after {self.config.request_timeout}s from {self.where}")
            return TransientLLMError(f"connection to {self.where} failed")
        if openai is not None and isinstance(exc, openai.APIError):  # e.g. a stream cut mid-way
            return TransientLLMError(f"{type(exc).__name__} from {self.where}")
        return exc

    def _from_status(self, status: int, headers: Any, message: str, param: str | None = None) -> Exception:
        """An HTTP error status as ours."""
        if status == 429:
            self._note_limits(headers)
            return RateLimitedError(f"429 from {self.where}", retry_after_seconds(headers))
        if status == 401:
            return LLMFatalError(f"{self.where}: authentication failed (401) - check the API key")
        if status == 403:
            return LLMFatalError(f"{self.where}: permission denied (403)")
        if status == 404:
            return LLMFatalError(f"{self.where}: not found (404) - check the model name and api_base")
        if status in (400, 422):
            short = message if len(message) <= 200 else message[:200] + "..."
            return RequestRejected(f"{self.where}: request rejected ({status}): {redact(short)}", param, message)
        wait = retry_after_seconds(headers)
        if status == 503 and wait is not None:  # overloaded, come back later: waited out like a 429
            return RateLimitedError(f"503 with Retry-After from {self.where}", wait)
        if status >= 500 or status in (408, 409):
            return TransientLLMError(f"{status} from {self.where}")
        return LLMFatalError(f"{self.where}: HTTP {status}")

    async def list_models(self) -> list[str]:
        """GET /models: proves the endpoint and key work without spending a token."""
        token = in_flight.begin(self.where, self._endpoint)
        try:
            if self._sdk is not None:
                return [m.id for m in (await self._sdk.models.list()).data]
            reply = await self._http.request("GET", self._base + "/models", self._headers)
            if reply.status >= 400:
                raise self._from_status(reply.status, reply.headers, reply.error_text(), reply.error_param())
            return [str(m.get("id")) for m in reply.json().get("data") or [] if isinstance(m, dict)]
        except (TransientLLMError, LLMFatalError):
            raise
        except (ValueError, AttributeError):
            raise TransientLLMError(
                f"{self.where} answered GET /models with something that is not a model list"
            ) from None
        except Exception as exc:
            raise self._translate(exc) from None
        finally:
            in_flight.end(token)

    async def close(self) -> None:
        if not self.closed:
            await (self._sdk.close() if self._sdk is not None else self._http.close())
            self.closed = True
            _UNCLOSED.discard(self)
