"""How many calls of one model a process keeps in flight: the layer under the job-wide rate limiter that keeps a
batch job from sending its whole first burst before the provider has answered once."""

from __future__ import annotations

import asyncio


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

    async def __aenter__(self) -> "AdaptiveConcurrency":
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
