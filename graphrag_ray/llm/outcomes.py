"""What one model call gives back or raises: a Completion (content, tokens, cached tokens, reasoning apart) read
from a chat completion body, and the call's errors, sorted into retryable (TransientLLMError and its kinds) and
fatal (RequestRejected; LLMFatalError in errors.py). The client (client.py) raises them, retry.py sorts by them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphrag_ray.errors import LLMFatalError
from graphrag_ray.llm.prices import cached_tokens_of
from graphrag_ray.llm.reasoning import reasoning_tokens_of, split_reasoning


class TransientLLMError(Exception):
    """5xx, timeout or dropped connection: worth retrying."""


class TimedOutError(TransientLLMError):
    """A request answered in one piece did not finish within request_timeout."""


class StalledError(TransientLLMError):
    """A streamed request's endpoint sent nothing for stall_timeout: the server may still be generating it."""


class CutStreamError(TransientLLMError):
    """A stream ended (`[DONE]`, or the connection closed) with no finish_reason: cut short, not finished - as
    llama.cpp's servers cut a stream when another request waits. Asked again, with fewer requests in flight."""


class RequestRejected(LLMFatalError):
    """400/422: the endpoint refused the request itself; `param` is the parameter it named, if any."""

    def __init__(self, message: str, param: str | None, detail: str):
        super().__init__(message)
        self.param, self.detail = param, detail

    def __reduce__(self):  # raised in a Ray worker, re-raised in the driver
        return type(self), (str(self), self.param, self.detail)


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
    reasoning_tokens: int = 0  # as the server reports them (inside completion_tokens, as providers bill them)
    reasoning: str = ""  # reasoning text (reasoning_content, or <think> blocks): never part of `content`
    cached_tokens: int = 0  # of prompt_tokens: served from the provider's prompt cache (llm/prices.py)


def completion_of(data: dict) -> Completion:
    """A chat completion's JSON body (a response, or a Batch API output line's body) as a Completion."""
    choice = (data.get("choices") or [{}])[0] or {}
    message = choice.get("message") or {}
    content, reasoning = split_reasoning(str(message.get("content") or ""), message)
    usage = data.get("usage") or {}
    return Completion(
        content,
        usage.get("prompt_tokens") or 0,
        usage.get("completion_tokens") or 0,
        choice.get("finish_reason"),
        reasoning_tokens=reasoning_tokens_of(usage),
        reasoning=reasoning,
        cached_tokens=cached_tokens_of(usage),
    )
