"""The HTTP under the LLM client: one keep-alive session per client, JSON in and out, server-sent events for streams.

An OpenAI-compatible endpoint is spoken to directly on aiohttp (or httpx2, `http_client: httpx`), not through the
openai SDK: importing the SDK costs more CPU than a query's whole start-up budget (jobs/bench_query_command.py),
in every process that makes a call and again in each Ray worker, and its request machinery costs more CPU per call
than the post itself.
Azure OpenAI still goes through the SDK (client.py), which knows its URLs and auth.

Both sessions answer the same way: `request` returns a `Reply` for any HTTP status; `stream` yields the lines of
a streamed answer; a request that got no HTTP answer at all raises `NoAnswer` (its cause chain holds the network
error, which client.py names).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

MAX_CONNECTIONS = 1000  # as the SDK's defaults: the concurrency setting, not the pool, bounds calls in flight
MAX_IDLE_CONNECTIONS = 100


class NoAnswer(Exception):
    """The request got no HTTP answer: refused, unresolved, TLS, dropped, or out of time (`timeout`)."""

    def __init__(self, timeout: bool):
        super().__init__("timeout" if timeout else "no answer")
        self.timeout = timeout


@dataclass
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)

    def error_text(self) -> str:
        """What an error answer says: its OpenAI-style {"error": {"message": ...}}, else its body."""
        try:
            return str(self.json()["error"]["message"])
        except Exception:  # noqa: BLE001 - any other body is shown as it is
            return self.body.decode("utf-8", "replace")

    def error_param(self) -> str | None:
        """The parameter an OpenAI-style error names ({"error": {"param": ...}}), if any."""
        try:
            param = self.json()["error"].get("param")
        except Exception:  # noqa: BLE001 - no such field
            return None
        return str(param) if param else None


def encode(body: dict) -> bytes:
    """JSON as UTF-8 (not \\u escapes: a Chinese prompt stays a third of the size)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


@functools.lru_cache(maxsize=1)
def ssl_context():
    """One verifying SSL context per process, shared by every session: building one loads the CA bundle (50-90 ms),
    and a session is opened per event loop and model."""
    import httpx2

    return httpx2.create_ssl_context()


class AiohttpSession:
    """aiohttp's ClientSession, opened on first use (it belongs to the event loop it is opened on)."""

    def __init__(self, timeout: float, secure: bool):
        self.timeout = timeout
        self.secure = secure
        self._session = None

    def _open(self):
        import aiohttp

        if self._session is None:
            # certifi's CA bundle, as the openai SDK verifies with; plain http (a local server) needs no context
            connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, ssl=ssl_context() if self.secure else True)
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
        return self._session

    @contextlib.asynccontextmanager
    async def _errors(self):
        import aiohttp

        try:
            yield
        except TimeoutError as exc:  # aiohttp's ServerTimeoutError is one
            raise NoAnswer(timeout=True) from exc
        except aiohttp.ClientError as exc:
            raise NoAnswer(timeout=False) from exc

    async def request(self, method: str, url: str, headers: dict[str, str], body: bytes | None = None) -> Reply:
        import aiohttp

        async with self._errors():
            async with self._open().request(
                method, url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=self.timeout)
            ) as response:
                return Reply(response.status, response.headers, await response.read())

    @contextlib.asynccontextmanager
    async def stream(self, url: str, headers: dict[str, str], body: bytes) -> AsyncIterator[tuple[Reply, Any]]:
        """(the reply without its body, its lines)."""
        import aiohttp

        # no read timeout: the client judges a stream by its endpoint's progress (client.py, stall_timeout)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=None)
        async with self._errors():
            async with self._open().post(url, data=body, headers=headers, timeout=timeout) as response:
                if response.status >= 400:
                    yield Reply(response.status, response.headers, await response.read()), None
                else:
                    yield Reply(response.status, response.headers), self._lines(response)

    async def _lines(self, response) -> AsyncIterator[str]:
        async with self._errors():
            async for line in response.content:
                yield line.decode("utf-8").rstrip("\r\n")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class HttpxSession:
    """httpx2's AsyncClient."""

    def __init__(self, timeout: float, secure: bool):
        import httpx2

        self._client = httpx2.AsyncClient(
            timeout=timeout,
            verify=ssl_context() if secure else True,
            follow_redirects=True,
            limits=httpx2.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_IDLE_CONNECTIONS),
        )

    @contextlib.asynccontextmanager
    async def _errors(self):
        import httpx2

        try:
            yield
        except httpx2.TimeoutException as exc:
            raise NoAnswer(timeout=True) from exc
        except httpx2.TransportError as exc:
            raise NoAnswer(timeout=False) from exc

    async def request(self, method: str, url: str, headers: dict[str, str], body: bytes | None = None) -> Reply:
        async with self._errors():
            response = await self._client.request(method, url, content=body, headers=headers)
            return Reply(response.status_code, response.headers, response.content)

    @contextlib.asynccontextmanager
    async def stream(self, url: str, headers: dict[str, str], body: bytes) -> AsyncIterator[tuple[Reply, Any]]:
        async with self._errors():
            import httpx2

            # no read timeout: the client judges a stream by its endpoint's progress (client.py, stall_timeout)
            timeout = httpx2.Timeout(
                self._client.timeout.connect, read=None, write=self._client.timeout.write, pool=None
            )
            async with self._client.stream("POST", url, content=body, headers=headers, timeout=timeout) as response:
                if response.status_code >= 400:
                    yield Reply(response.status_code, response.headers, await response.aread()), None
                else:
                    yield Reply(response.status_code, response.headers), self._lines(response)

    async def _lines(self, response) -> AsyncIterator[str]:
        async with self._errors():
            async for line in response.aiter_lines():
                yield line

    async def close(self) -> None:
        await self._client.aclose()


def open_session(kind: str, timeout: float, url: str) -> AiohttpSession | HttpxSession:
    """The session `kind` (aiohttp / httpx) for requests to `url`."""
    secure = url.lower().startswith("https:")
    return AiohttpSession(timeout, secure) if kind == "aiohttp" else HttpxSession(timeout, secure)


async def server_sent_events(lines: AsyncIterator[str]) -> AsyncIterator[dict]:
    """The JSON payloads of a `data:` event stream, up to `[DONE]` (comments, other fields and keep-alives
    skipped)."""
    async for line in lines:
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        if payload:
            yield json.loads(payload)


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


def openai_headers(key: str) -> dict[str, str]:
    """What the openai SDK sends an OpenAI-compatible endpoint: the key as a bearer token, and the organization
    and project its environment variables name (OpenAI bills to them)."""
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": "graphrag-ray",
    }
    for variable, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
        if value := os.environ.get(variable):
            headers[header] = value
    return headers


def network_cause(exc: BaseException) -> str | None:
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


def header_int(headers: Any, name: str) -> int | None:
    try:
        value = int(float(headers.get(name)))
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None
