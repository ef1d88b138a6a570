"""The endpoint check: the endpoint answers, accepts the key and serves the model - before anything is spent."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from graphrag_ray.config.settings import ModelConfig
from graphrag_ray.errors import EndpointError, LLMFatalError
from graphrag_ray.llm.client import OpenAIClient
from graphrag_ray.llm.outcomes import TimedOutError, TransientLLMError

log = logging.getLogger(__name__)


async def endpoint_answers(
    model_id: str, config: ModelConfig, attempts: int = 3, timeout: float = 8.0, busy_ok: bool = True
) -> None:
    """The endpoint answers, accepts the key and serves the model - GET /models, no tokens spent. Raises a
    one-line error naming the model and the cause otherwise. An endpoint that takes the connection and sends
    nothing within `timeout` is said at once (a warning within seconds, not a silence until a request times
    out); with `busy_ok` (a run, which may wait on a local server busy with another answer) the command goes on,
    otherwise (`graphrag-ray check`) it is the error."""
    if config.type == "local_embedding":
        return
    client = OpenAIClient(model_id, config.model_copy(update={"request_timeout": min(config.request_timeout, timeout)}))
    try:
        for attempt in range(attempts):
            try:
                names = await client.list_models()
                break
            except TimedOutError:
                if await _accepts_connections(config.api_base, timeout):
                    if not busy_ok:
                        raise EndpointError(
                            f"{client.where} accepted the connection but sent no answer to GET "
                            f"/models within {timeout:g}s (not answering, or busy generating)"
                        ) from None
                    # llama.cpp's /models waits for the model lock while it generates: busy is not unreachable
                    log.warning(
                        "%s accepted the connection but did not answer GET /models within %gs (busy, or "
                        "not answering at all): going on; a request is given up after stall_timeout "
                        "%gs without progress",
                        client.where,
                        timeout,
                        config.stall_timeout,
                    )
                    return
                raise EndpointError(f"{client.where} is unreachable (no connection within {timeout:g}s)") from None
            except TransientLLMError as exc:
                if attempt == attempts - 1:
                    raise EndpointError(f"{client.where} is unreachable or failing ({exc})") from None
                await asyncio.sleep(0.5 * (attempt + 1))
        if config.api_type == "openai" and names and config.model not in names:
            raise EndpointError(
                f"{client.where}: model not found (the endpoint serves: "
                f"{', '.join(sorted(names)[:8])}{', ...' if len(names) > 8 else ''})"
            )
    except LLMFatalError as exc:
        if "not found (404)" not in str(exc):  # a server without /models: the first real call will tell
            raise EndpointError(str(exc)) from None
    finally:
        await client.close()


async def _accepts_connections(api_base: str, timeout: float) -> bool:
    """A TCP connection to the endpoint's host and port opens."""
    from urllib.parse import urlsplit

    parts = urlsplit(api_base)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, port), timeout)
    except (TimeoutError, OSError):
        return False
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return True
