"""Retry layer: tenacity with exponential backoff and jitter on transient errors only.

429s wait at least the server's Retry-After; 400/401/403/404 (LLMFatalError) are never retried.
"""

from __future__ import annotations

from typing import Callable

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from graphrag_ray.config.settings import RetryConfig
from graphrag_ray.llm.client import RateLimitedError, TransientLLMError


class _RetryAfterOrBackoff:
    """Backoff with jitter, but never shorter than a 429's Retry-After."""

    def __init__(self, policy: RetryConfig):
        self.backoff = wait_exponential_jitter(multiplier=policy.initial_wait, max=policy.max_wait,
                                               jitter=policy.jitter)

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RateLimitedError) and exc.retry_after is not None:
            return exc.retry_after
        return self.backoff(state)


def retrying(policy: RetryConfig, on_retry: Callable[[BaseException], None]) -> AsyncRetrying:
    def before_sleep(state: RetryCallState) -> None:
        if state.outcome is not None and state.outcome.exception() is not None:
            on_retry(state.outcome.exception())

    return AsyncRetrying(
        retry=retry_if_exception_type(TransientLLMError),
        stop=stop_after_attempt(policy.max_attempts),
        wait=_RetryAfterOrBackoff(policy),
        before_sleep=before_sleep,
        reraise=True,
    )
