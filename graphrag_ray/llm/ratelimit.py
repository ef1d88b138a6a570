"""One RPM/TPM limiter for the whole job, that learns the provider's real limits.

`ModelWindow` is the arithmetic for one model: the requests and tokens granted in the last 60 seconds (a sliding
window, as providers count), so no 60-s window ever holds more than the allowed rate - the first minute included.
A reservation is placed at the earliest time the window has room; an oversized one (more than a minute's worth)
waits for an empty window and is charged what it is. What a call really used replaces what it reserved.

The allowed rate is adaptive (AIMD): its ceiling is the smaller of the configured limit and the limit the provider
announces in its `x-ratelimit-limit-*` headers; a 429 lowers it multiplicatively (a burst of 429s counts once), and
every clean stretch raises it additively back toward the ceiling. A 429 also pauses every caller of the model until
its Retry-After has passed - callers already holding a reservation check again before they send.

Two homes for the windows:
  * `RayRateLimiter` - a named Ray actor shared by every worker on every node (index, eval, global map);
  * `LocalRateLimiter` - the same windows in-process, for single-process commands.
Waiting always happens on the caller's side with `asyncio.sleep`; the limiter never blocks a loop. With no limit
configured and none announced yet, callers do not contact the limiter at all (no cost per call).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from dataclasses import dataclass, field

WINDOW_S = 61.0         # the providers' 60 s, and a second for the way to them: a request's window opens here when
                        # it is sent, the provider's when it arrives
BURST_S = 6.0           # pacing lets this many seconds' worth of the rate go at once (providers also enforce
                        # limits over shorter periods than a minute), the window caps every 60 s at the rate
DECREASE = 0.7          # a 429 keeps this share of the allowed rate
INCREASE = 0.05         # a clean stretch adds this share of the ceiling
CLEAN_S = 5.0           # seconds without a 429 that count as a clean stretch
FLOOR = 0.05            # the allowed rate never drops below this share of the ceiling
HEADROOM = 0.95         # the allowed rate tops out at this share of the ceiling: what a call uses is known only
                        # when it answers, and the provider counts it when it arrives


@dataclass
class _Rate:
    """One limited quantity (requests or tokens per minute): its ceiling and its adaptive allowed value."""

    configured: int | None
    learned: int | None = None
    allowed: float | None = None
    paced_until: float = float("-inf")  # when what was granted so far is paid off at the allowed rate (GCRA)

    def pace(self, start: float, amount: float) -> float:
        """The earliest send time >= start that keeps the flow at the allowed rate (a burst of BURST_S allowed);
        charges `amount`."""
        if self.allowed is None:
            return start
        start = max(start, self.paced_until - BURST_S)
        self.paced_until = max(self.paced_until, start) + amount * 60.0 / self.allowed
        return start

    def credit(self, amount: float) -> None:
        """Give back (or take) pacing for an amount reserved but not used (or used beyond)."""
        if self.allowed is not None:
            self.paced_until -= amount * 60.0 / self.allowed

    @property
    def ceiling(self) -> float | None:
        known = [v for v in (self.configured, self.learned) if v]
        return HEADROOM * min(known) if known else None

    def reset_to_ceiling(self) -> None:
        self.allowed = self.ceiling if self.allowed is None or self.ceiling is None else min(self.allowed,
                                                                                                self.ceiling)

    def decrease(self) -> None:
        if self.allowed is not None:
            self.allowed = max(self.ceiling * FLOOR, self.allowed * DECREASE)

    def increase(self) -> None:
        if self.allowed is not None and self.ceiling is not None:
            self.allowed = min(self.ceiling, self.allowed + self.ceiling * INCREASE)


@dataclass
class ModelWindow:
    rpm: int | None
    tpm: int | None
    clock: object = field(default=time.monotonic, repr=False)
    window_s: float = WINDOW_S

    def __post_init__(self):
        self.requests = _Rate(self.rpm)
        self.tokens = _Rate(self.tpm)
        self.requests.reset_to_ceiling()
        self.tokens.reset_to_ceiling()
        self.grants: deque[list] = deque()  # [send time, tokens, grant id], in send-time order
        self.by_id: dict[int, list] = {}
        self.ids = itertools.count(1)
        self.paused_until = 0.0
        self.last_refusal = float("-inf")
        self.last_change = self.clock()
        self.granted = self.refusals = 0

    @property
    def limited(self) -> bool:
        return self.requests.allowed is not None or self.tokens.allowed is not None

    def _prune(self, now: float) -> None:
        while self.grants and self.grants[0][0] <= now - self.window_s:
            self.by_id.pop(self.grants.popleft()[2], None)

    def _adapt(self, now: float) -> None:
        if now - self.last_refusal >= CLEAN_S and now - self.last_change >= CLEAN_S:
            self.requests.increase()
            self.tokens.increase()
            self.last_change = now

    def reserve(self, tokens: int) -> tuple[float, int | None]:
        """(seconds to wait before sending, grant id). Callers are served in order."""
        now = self.clock()
        self._prune(now)
        self._adapt(now)
        start = max(now, self.paused_until, self.grants[-1][0] if self.grants else now)
        if self.limited:
            tpm, rpm = self.tokens.allowed, self.requests.allowed
            in_window = [g for g in self.grants if g[0] > start - self.window_s]
            used, count = sum(g[1] for g in in_window), len(in_window)
            for oldest in in_window:  # until the window (start - 60 s, start] has room, move past its oldest grant
                if (tpm is None or used + tokens <= tpm) and (rpm is None or count + 1 <= rpm):
                    break
                start = max(start, oldest[0] + self.window_s)
                used, count = used - oldest[1], count - 1
            start = self.tokens.pace(self.requests.pace(start, 1), tokens)
        grant = next(self.ids)
        entry = [start, tokens, grant]
        self.grants.append(entry)
        self.by_id[grant] = entry
        self.granted += 1
        return start - now, grant

    def settle(self, grant: int | None, used: int) -> None:
        """What the call really used replaces what it reserved (0: it was never sent or was refused)."""
        entry = self.by_id.get(grant) if grant is not None else None
        if entry is not None:
            self.tokens.credit(entry[1] - used)
            entry[1] = used

    def refused(self, seconds: float) -> None:
        """A 429: every caller waits `seconds`; the allowed rate drops once per burst of refusals."""
        now = self.clock()
        self.paused_until = max(self.paused_until, now + seconds)
        self.refusals += 1
        if now - self.last_refusal >= max(1.0, seconds):
            self.requests.decrease()
            self.tokens.decrease()
            self.last_change = now
        self.last_refusal = now

    def learn(self, rpm: int | None, tpm: int | None) -> None:
        """Limits the provider announced (x-ratelimit-limit-requests / -tokens)."""
        for rate, value in ((self.requests, rpm), (self.tokens, tpm)):
            if value and value != rate.learned:
                rate.learned = value
                rate.reset_to_ceiling()

    def pause_left(self) -> float:
        return max(0.0, self.paused_until - self.clock())

    def stats(self) -> dict:
        return {"granted": self.granted, "refusals": self.refusals, "rpm": self.requests.allowed,
                "tpm": self.tokens.allowed, "learned_rpm": self.requests.learned, "learned_tpm": self.tokens.learned}


class _Registry:
    """Windows per model key; created on first use with that model's configured limits."""

    def __init__(self):
        self.windows: dict[str, ModelWindow] = {}

    def get(self, key: str, rpm: int | None, tpm: int | None) -> ModelWindow:
        if key not in self.windows:
            self.windows[key] = ModelWindow(rpm, tpm)
        return self.windows[key]

    def reserve(self, key: str, tokens: int, rpm: int | None, tpm: int | None) -> tuple[float, int | None]:
        return self.get(key, rpm, tpm).reserve(tokens)

    def settle(self, key: str, grant: int | None, used: int) -> None:
        if key in self.windows:
            self.windows[key].settle(grant, used)

    def refused(self, key: str, seconds: float, rpm: int | None, tpm: int | None) -> None:
        self.get(key, rpm, tpm).refused(seconds)

    def learn(self, key: str, rpm: int | None, tpm: int | None, learned_rpm: int | None,
              learned_tpm: int | None) -> None:
        self.get(key, rpm, tpm).learn(learned_rpm, learned_tpm)

    def pause_left(self, key: str) -> float:
        return self.windows[key].pause_left() if key in self.windows else 0.0

    def stats(self) -> dict:
        return {k: w.stats() for k, w in self.windows.items()}


class _Client:
    """What a model's calls see: acquire / settle / refused / learn. Calls a model makes before any limit is known
    (none configured, none announced, no 429 yet) skip the limiter entirely."""

    def __init__(self):
        self._known: set[str] = set()  # keys whose window is limited, as far as this process has seen
        self._learned: dict[str, tuple] = {}

    async def acquire(self, key: str, tokens: int, rpm: int | None, tpm: int | None) -> int | None:
        if not (rpm or tpm or key in self._known):
            return None
        wait, grant = await self._call("reserve", key, tokens, rpm, tpm)
        while wait > 0:  # a 429 during the wait holds this caller too: check again before sending
            await asyncio.sleep(wait)
            wait = await self._call("pause_left", key)
        return grant

    def settle(self, key: str, grant: int | None, used: int) -> None:
        if grant is not None:
            self._send("settle", key, grant, used)

    def refused(self, key: str, seconds: float, rpm: int | None, tpm: int | None) -> None:
        self._known.add(key)
        self._send("refused", key, seconds, rpm, tpm)

    def learn(self, key: str, rpm: int | None, tpm: int | None, learned_rpm: int | None,
              learned_tpm: int | None) -> None:
        if (learned_rpm or learned_tpm) and self._learned.get(key) != (learned_rpm, learned_tpm):
            self._learned[key] = (learned_rpm, learned_tpm)
            self._known.add(key)
            self._send("learn", key, rpm, tpm, learned_rpm, learned_tpm)

    def knows_limits(self, key: str) -> bool:
        """A limit was announced for `key`, or a 429 seen, in this process: its calls are accounted."""
        return key in self._known

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_known"], state["_learned"] = set(), {}
        return state


class LocalRateLimiter(_Client):
    """The windows in this process (one event loop / one process)."""

    def __init__(self):
        super().__init__()
        self._registry = _Registry()

    async def _call(self, method: str, *args):
        return getattr(self._registry, method)(*args)

    def _send(self, method: str, *args) -> None:
        getattr(self._registry, method)(*args)

    async def stats(self) -> dict:
        return self._registry.stats()


class LimiterActor(_Registry):
    """The Ray actor body: the registry behind remote calls (each call takes microseconds)."""


LIMITER_NAMESPACE = "graphrag_ray"


class RayRateLimiter(_Client):
    """Client side of the job-wide limiter; picklable, so it travels to every worker actor and task."""

    def __init__(self, handle):
        super().__init__()
        self._handle = handle

    @classmethod
    def for_job(cls, job_name: str) -> "RayRateLimiter":
        import ray

        actor_cls = ray.remote(num_cpus=0, max_restarts=-1)(LimiterActor)
        handle = actor_cls.options(name=f"limiter-{job_name}", namespace=LIMITER_NAMESPACE,
                                   get_if_exists=True).remote()
        return cls(handle)

    async def _call(self, method: str, *args):
        return await getattr(self._handle, method).remote(*args)

    def _send(self, method: str, *args) -> None:
        getattr(self._handle, method).remote(*args)  # fire and forget: nobody waits on it

    async def stats(self) -> dict:
        return await self._handle.stats.remote()


class AdaptiveConcurrency:
    """How many calls of one model this process keeps in flight. A cautious start sends one call alone until the
    first answer (which tells the provider's limits, if it publishes them), then opens up to `maximum`; a 429
    halves the cap, and it then grows by one per `cap` successes (additive increase)."""

    def __init__(self, maximum: int, cautious: bool = False):
        self.maximum = maximum
        self.cap = 1 if cautious else maximum
        self.probing = cautious
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
