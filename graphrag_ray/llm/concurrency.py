"""How many calls of one model a process keeps in flight: the layer under the job-wide rate limiter that keeps a
batch job from sending its whole first burst before the provider has answered once - and what a run learned about
each provider, kept with the index, so that an update starts where the run before it left off."""

from __future__ import annotations

import asyncio
import hashlib


class AdaptiveConcurrency:
    """How many calls of one model this process keeps in flight. A cautious start sends one call alone until the
    first answer (which tells the provider's limits, if it publishes them), then opens up to `maximum`; a 429
    halves the cap, and it then grows by one per `cap` successes (additive increase). The probe is the job's, not
    each process's: a worker whose job already had an answer from the model opens at once (`open_if`) - with
    every new worker probing alone, each step of an update paid one more round trip per worker."""

    def __init__(self, maximum: int, cautious: bool = False):
        self.maximum = maximum
        self.cap = 1 if cautious else maximum
        self.probing = cautious
        self.asked = not cautious  # whether the job was asked if it already had an answer
        self.running = 0
        self._successes = 0
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> AdaptiveConcurrency:
        async with self._changed:
            await self._changed.wait_for(lambda: self.running < self.cap)
            self.running += 1
        return self

    async def __aexit__(self, *exc) -> None:
        async with self._changed:
            self.running -= 1
            self._changed.notify_all()

    async def open_if(self, job_has_answered) -> None:
        """While probing, ask once (`await job_has_answered()`) whether another worker's probe already answered;
        if so, open up to `maximum` as this process's own first answer would."""
        if self.asked:
            return
        self.asked = True
        if await job_has_answered() and self.probing:
            self.probing, self.cap = False, self.maximum
            async with self._changed:
                self._changed.notify_all()

    def succeeded(self) -> None:
        if self.probing:
            self.probing, self.cap = False, self.maximum
            return
        self._successes += 1
        if self._successes >= self.cap:
            self.cap, self._successes = min(self.maximum, self.cap + 1), 0

    def refused(self) -> None:
        self.probing = False
        self.cap = max(1, self.cap // 2)
        self._successes = 0


def limiter_snapshot(limiter) -> dict:
    """The job limiter's stats, or none when it cannot be read: what a run learned is worth keeping, not worth
    failing a finished run for."""
    try:
        return limiter.snapshot()
    except Exception:  # noqa: BLE001
        return {}


def provider_limits(snapshot: dict, models: dict) -> dict:
    """What a run learned of each model's provider (`snapshot`: the job limiter's stats): that it answered, the
    limits it announced and how many 429s it sent - kept in the version's stats.json for the next run."""
    known = {}
    for key, seen in snapshot.items():
        config = models.get(key)
        if seen.get("answered") and config is not None:
            known[key] = {
                "model": config.model,
                "endpoint": _endpoint(config),
                "learned_rpm": seen.get("learned_rpm"),
                "learned_tpm": seen.get("learned_tpm"),
                "refusals": seen.get("refusals", 0),
            }
    return known


def warm_start(limiter, known: dict, models: dict) -> list[str]:
    """An update talks to the providers the previous run learned: their announced limits go to the job limiter
    at once, and their models skip the cautious start (each step's first call alone cost a round trip of wall
    time). Not for a model whose endpoint or name changed since, nor one that sent 429s without announcing its
    limits - that one probes again. Returns the models started warm."""
    warm = []
    for key, seen in sorted(known.items()):
        config = models.get(key)
        if config is None or (config.model, _endpoint(config)) != (seen.get("model"), seen.get("endpoint")):
            continue
        learned = (seen.get("learned_rpm"), seen.get("learned_tpm"))
        if seen.get("refusals") and not any(learned):
            continue
        limiter.learn(key, config.rate_limit.rpm, config.rate_limit.tpm, *learned)
        limiter.answer_seen(key)
        warm.append(key)
    return warm


def _endpoint(config) -> str:
    """Which endpoint, as a digest: a base URL can carry a credential (a query-string key), and none is written."""
    return hashlib.blake2b(config.api_base.encode(), digest_size=8).hexdigest()
