"""Innermost layer: one request on the openai SDK's HTTP client, errors sorted into retryable and fatal.

Chat completions and embeddings are posted as plain JSON on the SDK's own HTTP client, with its headers (Azure,
streams and the model list go through the SDK itself: see `_post_json`). The SDK's own retries are off (max_retries=0): tenacity in retry.py is the only retry loop. The SDK is imported
when the first client is made: a command answered from the cache or without an LLM never loads it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import signal
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator

from graphrag_ray.config.settings import ModelConfig
from graphrag_ray.errors import EndpointError, LLMFatalError
from graphrag_ray.secrets import redact

if TYPE_CHECKING:
    import numpy as np


class TransientLLMError(Exception):
    """5xx, timeout or dropped connection: worth retrying."""


class RateLimitedError(TransientLLMError):
    """429: retry after `retry_after` seconds; every worker pauses (see ratelimit.py)."""

    def __init__(self, message: str, retry_after: float | None):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class Completion:
    content: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None = None  # "length": cut at max_tokens
    raw: dict[str, Any] = field(default_factory=dict)


def retry_after_seconds(headers: Any) -> float | None:
    """OpenAI sends `retry-after-ms`; RFC servers send `Retry-After` in seconds."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue
    return None


# SDK clients opened per event loop, so `run()` can close them before the loop ends (an aiohttp session left
# open prints "Unclosed client session" at exit).
_OPEN_CLIENTS: dict[int, list["OpenAIClient"]] = {}


async def close_loop_clients() -> None:
    """Close every SDK client opened on the running loop."""
    for client in _OPEN_CLIENTS.pop(id(asyncio.get_running_loop()), []):
        await client.close()


_API_CALLS: dict[int, int] = {}  # public API calls running, per loop


@contextlib.asynccontextmanager
async def closing_clients():
    """Around a public async API call: when the last one running on this loop ends, the loop's SDK clients are
    closed (a user's own asyncio.run would otherwise end with "Unclosed client session" blocks); the next call
    opens new ones."""
    loop = id(asyncio.get_running_loop())
    _API_CALLS[loop] = _API_CALLS.get(loop, 0) + 1
    try:
        yield
    finally:
        _API_CALLS[loop] -= 1
        if not _API_CALLS[loop]:
            del _API_CALLS[loop]
            await close_loop_clients()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def run(coro):
    """asyncio.run(coro), closing every SDK client the coroutine opened, even when it fails.

    Ctrl-C interrupts at once, wherever the program waits (an `input()` inside the loop, a stream): asyncio.run's
    own handler only cancels the main task on the first Ctrl-C, which a blocking read never sees."""
    async def main():
        try:
            return await coro
        finally:
            await close_loop_clients()

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _interrupt) if main_thread else None
    try:
        return asyncio.run(main())
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous)


@functools.lru_cache(maxsize=1)
def _ssl_context():
    """One verifying SSL context per process, shared by every client: building one loads the CA bundle, and a
    client is opened per event loop and model."""
    import httpx2

    return httpx2.create_ssl_context()


class OpenAIClient:
    """Async chat completions (plain, streaming, JSON) and embeddings for one model entry."""

    def __init__(self, model_id: str, config: ModelConfig):
        import openai

        self.model_id = model_id
        self.config = config
        self.closed = False
        self.announced_limits: tuple[int | None, int | None] = (None, None)
        key = config.api_key.get_secret_value() if config.api_key else ""
        if not key:
            raise LLMFatalError(f"models.{model_id}.api_key is empty: set it (e.g. api_key: ${{GRAPHRAG_API_KEY}} "
                                "and export GRAPHRAG_API_KEY)")
        # one HTTP client per SDK client, made here so chat can post on it directly (see chat)
        transport = openai.DefaultAioHttpClient if config.http_client == "aiohttp" else openai.DefaultAsyncHttpxClient
        self._http = transport(timeout=config.request_timeout, verify=_ssl_context())
        common: dict[str, Any] = dict(api_key=key, max_retries=0, timeout=config.request_timeout,
                                      http_client=self._http)
        self._direct: tuple[str, dict[str, str]] | None = None  # (base URL, headers) for posting without the SDK
        if config.api_type == "azure":
            self._sdk = openai.AsyncAzureOpenAI(azure_endpoint=config.api_base, api_version=config.api_version,
                                                **common)
        else:
            self._sdk = openai.AsyncOpenAI(base_url=config.api_base, **common)
            headers = {**self._sdk.default_headers, **self._sdk.auth_headers}
            self._direct = (str(self._sdk.base_url).rstrip("/"),
                            {k: v for k, v in headers.items() if isinstance(v, str)})
        try:
            _OPEN_CLIENTS.setdefault(id(asyncio.get_running_loop()), []).append(self)
        except RuntimeError:  # created outside a loop: its owner closes it
            pass

    @property
    def where(self) -> str:
        return f"model '{self.config.model}' ({self.model_id}) at {self.config.api_base}"

    def _body(self, messages: list[dict], params: dict[str, Any], **more: Any) -> dict[str, Any]:
        return {"model": self.config.model, "messages": messages, **params, **more}

    async def chat(self, messages: list[dict], params: dict[str, Any]) -> Completion:
        """POST /chat/completions with the body as we built it, read as plain JSON."""
        data = await self._post_json("/chat/completions", self._body(messages, params))
        choices = data.get("choices") or [{}]
        content = ((choices[0] or {}).get("message") or {}).get("content") or ""
        usage = data.get("usage") or {}
        return Completion(content, usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0,
                          (choices[0] or {}).get("finish_reason"))

    async def _post_json(self, path: str, body: dict[str, Any]) -> dict:
        """One POST of a JSON body; the answer's JSON. An OpenAI-compatible endpoint is posted on the SDK's own HTTP
        client with the SDK's headers, but not through the SDK's request machinery: that copies every message
        through its TypedDict transform and builds request options, headers and URL anew per call - twice the CPU
        of the post itself, measured (1.25 ms against 0.60 ms per call). Azure goes through the SDK, which knows
        its URLs and auth."""
        import httpx2

        try:
            if self._direct is None:
                response = await self._sdk.post(path, body=body, cast_to=httpx2.Response)
            else:
                base, headers = self._direct
                response = await self._http.post(base + path, json=body, headers=headers)
                if response.status_code >= 400:
                    raise self._from_status(response.status_code, response.headers, _error_text(response))
            self._note_limits(response.headers)
            data = response.json()
        except ValueError:
            raise TransientLLMError(f"{self.where} sent an answer that is not JSON") from None
        except (TransientLLMError, LLMFatalError):
            raise
        except Exception as exc:
            raise self._translate(exc) from None
        if not isinstance(data, dict):
            raise TransientLLMError(f"{self.where} sent an answer that is not a JSON object")
        return data

    async def chat_stream(self, messages: list[dict], params: dict[str, Any],
                          usage_out: dict[str, int]) -> AsyncIterator[str]:
        """Yield text deltas; fills usage_out with prompt/completion tokens from the final chunk."""
        import openai
        from openai.types.chat.chat_completion import ChatCompletion
        from openai.types.chat.chat_completion_chunk import ChatCompletionChunk

        try:
            stream = await self._sdk.post(
                "/chat/completions", cast_to=ChatCompletion, stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
                body=self._body(messages, params, stream=True, stream_options={"include_usage": True}))
            self._note_limits(stream.response.headers)
            async for chunk in stream:
                if chunk.usage is not None:
                    usage_out["prompt_tokens"] = chunk.usage.prompt_tokens or 0
                    usage_out["completion_tokens"] = chunk.usage.completion_tokens or 0
                for choice in chunk.choices or []:
                    if choice.delta and choice.delta.content:
                        yield choice.delta.content
        except Exception as exc:
            raise self._translate(exc) from None

    async def embed(self, texts: list[str]) -> tuple["np.ndarray", int]:
        """A float32 matrix, one row per text, and the prompt tokens used. The vectors are asked for as base64
        float32 (as the SDK does) and decoded straight into the matrix: no Python float per number."""
        import numpy as np

        body: dict[str, Any] = {"model": self.config.model, "input": texts, "encoding_format": "base64"}
        if self.config.dimensions:
            body["dimensions"] = self.config.dimensions
        data = await self._post_json("/embeddings", body)
        try:
            items = sorted(data["data"], key=lambda d: d.get("index", 0))
            rows = [np.frombuffer(base64.b64decode(item["embedding"]), dtype=np.float32)
                    if isinstance(item["embedding"], str) else np.asarray(item["embedding"], dtype=np.float32)
                    for item in items]  # a server that ignores encoding_format sends floats
            matrix = np.vstack(rows) if rows else np.zeros((0, 0), dtype=np.float32)
        except (KeyError, TypeError, ValueError, binascii.Error):
            raise TransientLLMError(f"{self.where} sent an embedding answer in an unknown shape") from None
        if matrix.shape[0] != len(texts):
            raise TransientLLMError(f"{self.where} sent {matrix.shape[0]} vectors for {len(texts)} texts")
        return matrix, (data.get("usage") or {}).get("prompt_tokens") or 0

    def _note_limits(self, headers: Any) -> None:
        """The requests / tokens per minute the provider says this key may use (None where it does not say)."""
        self.announced_limits = (_header_int(headers, "x-ratelimit-limit-requests"),
                                 _header_int(headers, "x-ratelimit-limit-tokens"))

    def _translate(self, exc: Exception) -> Exception:
        """The SDK's or the HTTP client's exception as ours: retryable (TransientLLMError, RateLimitedError) or
        fatal (LLMFatalError); anything else is returned as it is."""
        import httpx2
        import openai

        if isinstance(exc, openai.APIStatusError):
            return self._from_status(exc.status_code, exc.response.headers, str(getattr(exc, "message", exc)))
        timeout = isinstance(exc, (openai.APITimeoutError, httpx2.TimeoutException))
        if timeout or isinstance(exc, (openai.APIConnectionError, httpx2.TransportError)):
            if cause := _network_cause(exc):
                return TransientLLMError(f"connection to {self.where} failed: {cause}")
            if timeout:
                return TransientLLMError(f"timeout after {self.config.request_timeout}s from {self.where}")
            return TransientLLMError(f"connection to {self.where} failed")
        if isinstance(exc, openai.APIError):  # e.g. a stream cut mid-way
            return TransientLLMError(f"{type(exc).__name__} from {self.where}")
        return exc

    def _from_status(self, status: int, headers: Any, message: str) -> Exception:
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
            return LLMFatalError(f"{self.where}: request rejected ({status}): {redact(short)}")
        wait = retry_after_seconds(headers)
        if status == 503 and wait is not None:  # overloaded, come back later: waited out like a 429
            return RateLimitedError(f"503 with Retry-After from {self.where}", wait)
        if status >= 500 or status in (408, 409):
            return TransientLLMError(f"{status} from {self.where}")
        return LLMFatalError(f"{self.where}: HTTP {status}")

    async def list_models(self) -> list[str]:
        """GET /models: proves the endpoint and key work without spending a token."""
        try:
            page = await self._sdk.models.list()
        except Exception as exc:
            raise self._translate(exc) from None
        return [m.id for m in page.data]

    async def close(self) -> None:
        if not self.closed:
            await self._sdk.close()
            self.closed = True


def _network_cause(exc: BaseException) -> str | None:
    """What really went wrong under the SDK's "Request timed out" / "Connection error" (its aiohttp transport
    reports a refused connection as a timeout): connection refused, host name not resolved, TLS failure."""
    import socket
    import ssl

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ConnectionRefusedError):
            return "connection refused"
        if isinstance(exc, socket.gaierror):
            return "host name not resolved"
        if isinstance(exc, ssl.SSLError):
            return f"TLS failed ({exc.reason or exc})"
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _header_int(headers: Any, name: str) -> int | None:
    try:
        value = int(float(headers.get(name)))
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def _error_text(response: Any) -> str:
    """What an error response says: its OpenAI-style {"error": {"message": ...}}, else its body."""
    try:
        return str(response.json()["error"]["message"])
    except Exception:  # noqa: BLE001 - any other body is shown as it is
        return response.text


async def endpoint_answers(model_id: str, config: ModelConfig, attempts: int = 3, timeout: float = 15.0) -> None:
    """The endpoint answers, accepts the key and serves the model - GET /models, no tokens spent. Raises a
    one-line error naming the model and the cause otherwise."""
    if config.type == "local_embedding":
        return
    client = OpenAIClient(model_id, config.model_copy(update={"request_timeout": min(config.request_timeout,
                                                                                     timeout)}))
    try:
        for attempt in range(attempts):
            try:
                names = await client.list_models()
                break
            except TransientLLMError as exc:
                if attempt == attempts - 1:
                    raise EndpointError(f"{client.where} is unreachable or failing ({exc})") from None
                await asyncio.sleep(0.5 * (attempt + 1))
        if config.api_type == "openai" and names and config.model not in names:
            raise EndpointError(f"{client.where}: model not found (the endpoint serves: "
                                f"{', '.join(sorted(names)[:8])}{', ...' if len(names) > 8 else ''})")
    except LLMFatalError as exc:
        if "not found (404)" not in str(exc):  # a server without /models: the first real call will tell
            raise EndpointError(str(exc)) from None
    finally:
        await client.close()
