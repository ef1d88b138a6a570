"""The rate arithmetic for one model (`ModelWindow`): the requests and tokens granted in the last 60 seconds (a
sliding window, as providers count), pacing, and the adaptive (AIMD) allowed rate below the ceiling - what
ratelimit.py's queues and limiters (in this process or a Ray actor) ask before each grant."""

from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass, field

WINDOW_S = 61.0  # the providers' 60 s, and a second for the way to them: a request's window opens here when
# it is sent, the provider's when it arrives
BURST_S = 6.0  # pacing lets this many seconds' worth of the rate go at once (providers also enforce
# limits over shorter periods than a minute), the window caps every 60 s at the rate
DECREASE = 0.7  # a 429 keeps this share of the allowed rate
INCREASE = 0.05  # a clean stretch adds this share of the ceiling
CLEAN_S = 5.0  # seconds without a 429 that count as a clean stretch
FLOOR = 0.05  # the allowed rate never drops below this share of the ceiling
MAX_NAP_S = 5.0  # a waiter behind the first looks again at least this often (it is woken when its turn comes)
HEADROOM = 0.98  # the allowed rate tops out at this share of the ceiling: what a call uses is known only
# when it answers, and the provider counts it when it arrives. Reservations already
# expect the longest answer of their kind and the window is a second longer than the
# provider's, so little more is needed: 0.95 left ~13% of a learned TPM unused
# (bench_adaptive learn, 2 x 429 in 283 requests)


@dataclass
class _Rate:
    """One limited quantity (requests or tokens per minute): its ceiling and its adaptive allowed value."""

    configured: int | None
    learned: int | None = None
    allowed: float | None = None
    paced_until: float = float("-inf")  # when what was granted so far is paid off at the allowed rate (GCRA)

    def ready_at(self) -> float:
        """The earliest send time that keeps the flow at the allowed rate (a burst of BURST_S allowed)."""
        return float("-inf") if self.allowed is None else self.paced_until - BURST_S

    def charge(self, at: float, amount: float) -> None:
        if self.allowed is not None:
            self.paced_until = max(self.paced_until, at) + amount * 60.0 / self.allowed

    def credit(self, amount: float) -> None:
        """Give back (or take) pacing for an amount reserved but not used (or used beyond)."""
        if self.allowed is not None:
            self.paced_until -= amount * 60.0 / self.allowed

    @property
    def ceiling(self) -> float | None:
        known = [v for v in (self.configured, self.learned) if v]
        return HEADROOM * min(known) if known else None

    def reset_to_ceiling(self) -> None:
        self.allowed = self.ceiling if self.allowed is None or self.ceiling is None else min(self.allowed, self.ceiling)

    def decrease(self) -> None:
        if self.allowed is not None:
            self.allowed = max(self.ceiling * FLOOR, self.allowed * DECREASE)

    def increase(self) -> None:
        if self.allowed is not None and self.ceiling is not None:
            self.allowed = min(self.ceiling, self.allowed + self.ceiling * INCREASE)


@dataclass
class ModelWindow:
    """The arithmetic for one model. `earliest(tokens)` says how long until a request of that size fits (the
    window has room, the pacing allows it, no pause); `grant(tokens)` books it as sent now. Granting only at send
    time (never booking a slot in the future) lets every settlement - a call that used less than it reserved -
    move the waiting callers forward at once."""

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
        self.answers: dict[str, list] = {}  # kind of request -> [average, longest] answer tokens, job-wide
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

    def earliest(self, tokens: int) -> float:
        """Seconds from now until a request of `tokens` may be sent (0: now). An oversized request (more than the
        allowed rate holds) waits for an empty window."""
        now = self.clock()
        self._prune(now)
        self._adapt(now)
        start = max(now, self.paused_until)
        if self.limited:
            tpm, rpm = self.tokens.allowed, self.requests.allowed
            in_window = [g for g in self.grants if g[0] > start - self.window_s]
            used, count = sum(g[1] for g in in_window), len(in_window)
            for oldest in in_window:  # until the window (start - 60 s, start] has room, move past its oldest grant
                if (tpm is None or used + tokens <= tpm) and (rpm is None or count + 1 <= rpm):
                    break
                start = max(start, oldest[0] + self.window_s)
                used, count = used - oldest[1], count - 1
            start = max(start, self.requests.ready_at(), self.tokens.ready_at())
        return start - now

    def grant(self, tokens: int) -> int:
        """Book a request of `tokens` as sent now; returns its grant id (for `settle`)."""
        now = self.clock()
        self.requests.charge(now, 1)
        self.tokens.charge(now, tokens)
        grant = next(self.ids)
        entry = [now, tokens, grant]
        self.grants.append(entry)
        self.by_id[grant] = entry
        self.granted += 1
        return grant

    def reservation(self, prompt: int, max_completion: int, kind: str = "") -> int:
        """What a request reserves when it is granted: its prompt and the longest answer to expect from requests
        of its kind (a pipeline stage: extraction answers are long, summaries short) - the longest so far or one
        and a half times the average, whichever is more, at most max_completion (all a first call can go by).
        Worked out at grant time from every answer the job has settled: a request that waited in line does not
        hold the guess it was made with."""
        if not max_completion:
            return prompt
        if kind not in self.answers:
            return prompt + max_completion
        average, longest = self.answers[kind]
        return prompt + min(max_completion, max(longest, int(1.5 * average) + 16))

    def settle(self, grant: int | None, used: int, completion: int | None = None, kind: str = "") -> None:
        """What the call really used replaces what it reserved (0: it was never sent or was refused);
        `completion`: its answer's tokens, which later reservations of its kind expect."""
        entry = self.by_id.get(grant) if grant is not None else None
        if entry is not None:
            self.tokens.credit(entry[1] - used)
            entry[1] = used
        if completion is not None and used:
            average, longest = self.answers.get(kind, (completion, 0))
            self.answers[kind] = [0.9 * average + 0.1 * completion, max(longest, completion)]

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
        return {
            "granted": self.granted,
            "refusals": self.refusals,
            "rpm": self.requests.allowed,
            "tpm": self.tokens.allowed,
            "learned_rpm": self.requests.learned,
            "learned_tpm": self.tokens.learned,
            "paused_s": round(self.pause_left(), 1),
        }
