"""One RPM/TPM limiter for the whole job.

`TokenBuckets` is the arithmetic (GCRA-style: a reservation is charged at once and may drive a bucket
into debt; the caller is told how long to wait until that debt is repaid, so waiters are served in
order with one round trip and no polling). Two homes for it:
  * `RayRateLimiter` - a named Ray actor shared by every worker on every node (index, eval, global map);
  * `LocalRateLimiter` - the same buckets in-process, for single-process commands (a CLI query).
Waiting always happens on the caller's side with `asyncio.sleep`; the limiter never blocks a loop.
A 429 pauses every caller of that model until the server's Retry-After has passed, not only the refused one.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field


@dataclass
class _Bucket:
    per_minute: float
    balance: float
    updated: float

    @property
    def rate(self) -> float:
        return self.per_minute / 60.0

    def refill(self, now: float) -> None:
        self.balance = min(self.per_minute, self.balance + (now - self.updated) * self.rate)
        self.updated = now

    def charge(self, amount: float, now: float) -> float:
        """Charge `amount`; return seconds until the balance is back to >= 0."""
        self.refill(now)
        self.balance -= min(amount, self.per_minute)
        return max(0.0, -self.balance / self.rate)


@dataclass
class TokenBuckets:
    """Request and token buckets of one model, each holding at most one minute of its limit."""

    rpm: int | None
    tpm: int | None
    clock: object = field(default=time.monotonic, repr=False)
    paused_until: float = 0.0
    granted: int = 0
    pauses: int = 0

    def __post_init__(self):
        now = self.clock()
        self._requests = _Bucket(self.rpm, float(self.rpm), now) if self.rpm else None
        self._tokens = _Bucket(self.tpm, float(self.tpm), now) if self.tpm else None

    def reserve(self, tokens: int) -> float:
        now = self.clock()
        wait = max(0.0, self.paused_until - now)
        if self._requests:
            wait = max(wait, self._requests.charge(1, now))
        if self._tokens:
            wait = max(wait, self._tokens.charge(tokens, now))
        self.granted += 1
        return wait

    def reconcile(self, reserved: int, actual: int) -> None:
        """Give back what a call reserved but did not use (or take what it used beyond)."""
        if self._tokens:
            self._tokens.refill(self.clock())
            self._tokens.balance = min(self._tokens.per_minute, self._tokens.balance + reserved - actual)

    def pause(self, seconds: float) -> None:
        """The server refused us: everyone waits, and the buckets restart empty so we ramp up again."""
        now = self.clock()
        self.paused_until = max(self.paused_until, now + seconds)
        self.pauses += 1
        for bucket in (self._requests, self._tokens):
            if bucket:
                bucket.refill(now)
                bucket.balance = min(bucket.balance, 0.0)


class _Registry:
    """Buckets per model key; created on first use with that model's limits."""

    def __init__(self):
        self.buckets: dict[str, TokenBuckets] = {}

    def get(self, key: str, rpm: int | None, tpm: int | None) -> TokenBuckets:
        if key not in self.buckets:
            self.buckets[key] = TokenBuckets(rpm, tpm)
        return self.buckets[key]

    def stats(self) -> dict:
        return {k: {"granted": b.granted, "pauses": b.pauses, "rpm": b.rpm, "tpm": b.tpm}
                for k, b in self.buckets.items()}


class LocalRateLimiter:
    """In-process limiter (one event loop / one process)."""

    def __init__(self):
        self._registry = _Registry()

    async def acquire(self, key: str, tokens: int, rpm: int | None, tpm: int | None) -> None:
        if rpm is None and tpm is None:
            return
        delay = self._registry.get(key, rpm, tpm).reserve(tokens)
        if delay > 0:
            await asyncio.sleep(delay)

    def reconcile(self, key: str, reserved: int, actual: int) -> None:
        if key in self._registry.buckets:
            self._registry.buckets[key].reconcile(reserved, actual)

    def pause(self, key: str, seconds: float, rpm: int | None, tpm: int | None) -> None:
        self._registry.get(key, rpm, tpm).pause(seconds)

    async def stats(self) -> dict:
        return self._registry.stats()


class LimiterActor:
    """The Ray actor body: the registry behind remote calls (each call takes microseconds)."""

    def __init__(self):
        self._registry = _Registry()

    def reserve(self, key: str, tokens: int, rpm: int | None, tpm: int | None) -> float:
        return self._registry.get(key, rpm, tpm).reserve(tokens)

    def reconcile(self, key: str, reserved: int, actual: int) -> None:
        if key in self._registry.buckets:
            self._registry.buckets[key].reconcile(reserved, actual)

    def pause(self, key: str, seconds: float, rpm: int | None, tpm: int | None) -> None:
        self._registry.get(key, rpm, tpm).pause(seconds)

    def stats(self) -> dict:
        return self._registry.stats()


LIMITER_NAMESPACE = "graphrag_ray"


class RayRateLimiter:
    """Client side of the job-wide limiter; picklable, so it travels to every worker actor and task."""

    def __init__(self, handle):
        self._handle = handle

    @classmethod
    def for_job(cls, job_name: str) -> "RayRateLimiter":
        import ray

        actor_cls = ray.remote(num_cpus=0, max_restarts=-1)(LimiterActor)
        handle = actor_cls.options(name=f"limiter-{job_name}", namespace=LIMITER_NAMESPACE,
                                   get_if_exists=True).remote()
        return cls(handle)

    async def acquire(self, key: str, tokens: int, rpm: int | None, tpm: int | None) -> None:
        if rpm is None and tpm is None:
            return
        delay = await self._handle.reserve.remote(key, tokens, rpm, tpm)
        if delay > 0:
            await asyncio.sleep(delay)

    def reconcile(self, key: str, reserved: int, actual: int) -> None:
        self._handle.reconcile.remote(key, reserved, actual)  # fire and forget: nobody waits on it

    def pause(self, key: str, seconds: float, rpm: int | None, tpm: int | None) -> None:
        self._handle.pause.remote(key, seconds, rpm, tpm)

    async def stats(self) -> dict:
        return await self._handle.stats.remote()
