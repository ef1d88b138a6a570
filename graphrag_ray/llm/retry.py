"""Retry layer: tenacity with exponential backoff and jitter on transient errors only.

A 429 is not a failure while the job can finish: it waits max(Retry-After, the backoff) and does not use up
`max_attempts`; a request stops retrying 429s only after `rate_limit_deadline_s`. Other transient errors (5xx,
timeouts, dropped connections) use up attempts; 400/401/403/404 (LLMFatalError) are never retried. An answer that
arrived but cannot be used is not retried here (the identical request would get the identical answer): ChatModel
asks once more with a changed request.
"""

from __future__ import annotations

from collections.abc import Callable

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type
from tenacity.wait import wait_exponential_jitter

from graphrag_ray.config.settings import RetryConfig
from graphrag_ray.llm.outcomes import RateLimitedError, TransientLLMError


class _RetryAfterOrBackoff:
    """Backoff with jitter, and never shorter than a 429's Retry-After."""

    def __init__(self, policy: RetryConfig):
        self.backoff = wait_exponential_jitter(
            multiplier=policy.initial_wait, max=policy.max_wait, jitter=policy.jitter
        )

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        backoff = self.backoff(state)
        if isinstance(exc, RateLimitedError) and exc.retry_after is not None:
            return max(exc.retry_after, backoff)
        return backoff


class _AttemptsOrDeadline:
    """Stop after `max_attempts` failures that are not rate limits, or once 429s have lasted past the deadline."""

    def __init__(self, policy: RetryConfig):
        self.policy = policy
        self.failures = 0

    def __call__(self, state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RateLimitedError):
            return state.seconds_since_start >= self.policy.rate_limit_deadline_s
        self.failures += 1
        return self.failures >= self.policy.max_attempts


def retrying(policy: RetryConfig, on_retry: Callable[[BaseException], None]) -> AsyncRetrying:
    def before_sleep(state: RetryCallState) -> None:
        if state.outcome is not None and state.outcome.exception() is not None:
            on_retry(state.outcome.exception())

    return AsyncRetrying(
        retry=retry_if_exception_type(TransientLLMError),
        stop=_AttemptsOrDeadline(policy),
        wait=_RetryAfterOrBackoff(policy),
        before_sleep=before_sleep,
        reraise=True,
    )
