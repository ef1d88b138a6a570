"""The job-wide limiter's arithmetic (sliding 60-s windows, AIMD, learned limits) and its client's waiting."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from graphrag_ray.llm.concurrency import AdaptiveConcurrency
from graphrag_ray.llm.rate_window import HEADROOM, ModelWindow
from graphrag_ray.llm.ratelimit import LocalRateLimiter


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def send_when_allowed(window: ModelWindow, clock: Clock, tokens: int) -> int:
    """What the queue does for its first waiter: wait until the request fits, then grant it."""
    clock.t += window.earliest(tokens)
    assert window.earliest(tokens) == 0
    return window.grant(tokens)


def test_no_60_second_window_holds_more_than_the_limit_first_minute_included():
    clock = Clock()
    window = ModelWindow(rpm=None, tpm=6000, clock=clock)
    rng = random.Random(3)
    sent = []
    for _ in range(400):
        clock.t += rng.random() * 0.5
        tokens = rng.randint(100, 900)
        grant = send_when_allowed(window, clock, tokens)
        used = rng.randint(tokens // 2, tokens)  # a call uses what it reserved or less
        window.settle(grant, used)
        sent.append((clock.t, used))
    for start, _ in sent:
        in_window = sum(u for t, u in sent if start <= t < start + 60)
        assert in_window <= 6000, (start, in_window)
    assert sent[-1][0] - sent[0][0] > 60, "the work was spread, not refused"


def test_requests_per_minute_are_paced_and_counted_in_the_window():
    clock = Clock()
    window = ModelWindow(rpm=60, tpm=None, clock=clock)
    start = clock.t
    sends = []
    for _ in range(150):  # all asked for at once
        send_when_allowed(window, clock, 1)
        sends.append(clock.t - start)
    gap = 60 / (60 * HEADROOM)  # the allowed rate keeps a little headroom below the limit
    assert sends[:6] == [0.0] * 6, "a short burst goes at once"
    assert sends[8] - sends[7] == pytest.approx(gap) and sends[9] - sends[8] == pytest.approx(gap), (
        "then one request per 1/rate seconds"
    )
    assert all(sum(1 for t in sends if start <= t < start + 60) <= 60 for start in sends)


def test_an_oversized_request_is_charged_its_real_size():
    clock = Clock()
    window = ModelWindow(rpm=None, tpm=1000, clock=clock)
    sends = []
    for _ in range(5):
        grant = send_when_allowed(window, clock, 7500)  # larger than a minute's worth
        sends.append(clock.t)
        window.settle(grant, 7500)
    assert all(b - a >= 60 for a, b in zip(sends, sends[1:])), "alone in its window"
    assert (sends[-1] - sends[0]) / 60 >= 4 * 7500 / 1000 - 0.1, "7,500 tokens cost 7.5 minutes at 1,000 a minute"


def test_learned_limits_cap_the_rate_and_429s_lower_it_until_clean_stretches_raise_it():
    clock = Clock()
    window = ModelWindow(rpm=None, tpm=None, clock=clock)
    assert not window.limited and window.earliest(10**6) == 0.0
    window.learn(None, 15000)
    top = 15000 * HEADROOM
    assert window.tokens.allowed == pytest.approx(top)
    window.refused(2.0)
    assert window.tokens.allowed == pytest.approx(top * 0.7) and window.pause_left() == 2.0
    window.refused(2.0)  # the same burst of refusals: lowered once
    assert window.tokens.allowed == pytest.approx(top * 0.7)
    clock.t += 6
    window.earliest(1)
    assert window.tokens.allowed == pytest.approx(top * 0.75), "a clean stretch adds 5 % of the ceiling"
    window.learn(None, 7500)  # the provider lowered the key's limit mid-run
    assert window.tokens.allowed == pytest.approx(7500 * HEADROOM)
    configured = ModelWindow(rpm=None, tpm=5000, clock=clock)
    configured.learn(None, 15000)
    assert configured.tokens.allowed == pytest.approx(5000 * HEADROOM), "a configured limit is a ceiling"


def test_a_reservation_holder_waits_out_a_pause_announced_while_it_waits():
    async def main():
        limiter = LocalRateLimiter()
        limiter._registry.windows["m"] = ModelWindow(rpm=120, tpm=None)  # 2 a second, 12 at once
        for _ in range(13):
            await limiter.acquire("m", 1, 120, None)
        started = time.monotonic()
        holder = asyncio.ensure_future(limiter.acquire("m", 1, 120, None))  # granted for 0.5 s from now
        await asyncio.sleep(0.2)
        limiter.refused("m", 1.5, 120, None)  # a 429 elsewhere: everyone waits until ~1.7 s
        await holder
        return time.monotonic() - started

    assert asyncio.run(main()) >= 1.6


def test_unlimited_models_never_contact_the_limiter_until_a_limit_is_known():
    async def main():
        limiter = LocalRateLimiter()
        assert await limiter.acquire("m", 500, None, None) is None and limiter._registry.windows == {}
        limiter.learn("m", None, None, 100, 20000)
        assert await limiter.acquire("m", 500, None, None) is not None
        return await limiter.stats()

    stats = asyncio.run(main())
    assert stats["m"]["learned_tpm"] == 20000 and stats["m"]["rpm"] == pytest.approx(100 * HEADROOM)


def test_concurrency_probes_with_one_call_then_opens_and_halves_on_a_429():
    slots = AdaptiveConcurrency(16, cautious=True)
    assert slots.cap == 1
    slots.succeeded()  # the first answer: the provider's limits are known now, if it publishes them
    assert slots.cap == 16
    slots.refused()
    assert slots.cap == 8
    for _ in range(8):
        slots.succeeded()
    assert slots.cap == 9, "after a 429 it grows by one per window of successes"
    assert AdaptiveConcurrency(16).cap == 16, "a query does not probe: it opens at once"


def test_a_worker_opens_at_once_when_its_job_already_had_an_answer_from_the_model():
    """The cautious start is the job's: the first worker probes alone; a worker started later (a new step's actor,
    another node) whose job has had an answer sends its calls at once - and its callers already waiting go."""
    limiter = LocalRateLimiter()

    async def main():
        first = AdaptiveConcurrency(8, cautious=True)
        await first.open_if(lambda: limiter.job_has_answered("m"))
        assert first.cap == 1, "nothing answered yet: this one probes"
        first.succeeded()
        limiter.answer_seen("m")
        later = AdaptiveConcurrency(8, cautious=True)
        peak = 0

        async def call():
            nonlocal peak
            async with later:
                peak = max(peak, later.running)
                await asyncio.sleep(0.01)

        waiting = [asyncio.ensure_future(call()) for _ in range(5)]
        await asyncio.sleep(0)  # they queue behind the probe's cap of 1
        await later.open_if(lambda: limiter.job_has_answered("m"))
        await asyncio.gather(*waiting)
        return later.cap, peak

    cap, peak = asyncio.run(main())
    assert cap == 8 and peak == 5, (cap, peak)
    assert not asyncio.run(LocalRateLimiter().job_has_answered("m")), "another job has its own probe"


def test_429s_use_up_no_attempt_and_stop_only_at_the_deadline():
    from graphrag_ray.config.settings import RetryConfig
    from graphrag_ray.llm.outcomes import RateLimitedError, TransientLLMError
    from graphrag_ray.llm.retry import retrying

    policy = RetryConfig(max_attempts=2, initial_wait=0.01, max_wait=0.02, jitter=0.0, rate_limit_deadline_s=0.6)

    async def attempts(failures: list[Exception]) -> tuple[int, Exception | None]:
        calls = 0
        try:
            async for attempt in retrying(policy, lambda exc: None):
                with attempt:
                    calls += 1
                    if failures:
                        raise failures.pop(0)
        except TransientLLMError as exc:
            return calls, exc
        return calls, None

    calls, error = asyncio.run(attempts([RateLimitedError("429", 0.01) for _ in range(6)]))
    assert (calls, error) == (7, None), "six 429s and then an answer: no attempt used up"
    started = time.monotonic()
    calls, error = asyncio.run(attempts([RateLimitedError("429", 0.05) for _ in range(1000)]))
    assert isinstance(error, RateLimitedError) and 0.6 <= time.monotonic() - started < 2.0
    calls, error = asyncio.run(attempts([TransientLLMError("503") for _ in range(5)]))
    assert calls == 2 and str(error) == "503", "other failures use up max_attempts"


def test_a_call_that_used_less_than_it_reserved_lets_the_next_waiter_go_at_once():
    async def main():
        limiter = LocalRateLimiter()
        first = await limiter.acquire("m", 900, None, 1000)
        started = time.monotonic()
        second = asyncio.ensure_future(limiter.acquire("m", 800, None, 1000))  # no room for a minute
        await asyncio.sleep(0.3)
        assert not second.done()
        limiter.settle("m", first, 100)  # the answer was short
        await asyncio.wait_for(second, 5)
        return time.monotonic() - started

    assert asyncio.run(main()) < 5, "the freed room is used at once, not after the minute the reservation held"


def test_a_waiting_request_reserves_the_answer_the_job_has_learned_to_expect_not_its_first_guess():
    async def main():
        limiter = LocalRateLimiter()
        first = await limiter.acquire("m", 100, None, 1000, max_completion=800)  # no answer yet: 100 + 800
        second = asyncio.ensure_future(limiter.acquire("m", 100, None, 1000, max_completion=800))
        await asyncio.sleep(0.3)
        assert not second.done(), "900 + 900 tokens are more than the minute's 950"
        limiter.settle("m", first, 150, completion=50)  # answers are short: the waiter now expects 91, not 800
        started = time.monotonic()
        await asyncio.wait_for(second, 10)
        return time.monotonic() - started, limiter._registry.windows["m"]

    waited, window = asyncio.run(main())
    assert waited < 10 and [g[1] for g in window.grants] == [150, 100 + max(50, int(1.5 * 50) + 16)]
    assert window.reservation(100, 30) == 130, "never more than the request's own max_tokens"
    window.settle(None, 120, completion=20, kind="summarize_descriptions")
    assert window.reservation(100, 800, "summarize_descriptions") == 100 + max(20, int(1.5 * 20) + 16)
    assert window.reservation(100, 800, "community_reports") == 900, "another kind of request: nothing known yet"
    assert window.reservation(100, 800) == 191, "answers of one kind do not change what another expects"


def test_waiters_are_served_in_order_and_one_that_gives_up_leaves_the_line():
    async def main():
        limiter = LocalRateLimiter()
        holder = await limiter.acquire("m", 900, None, 1000)
        limiter.settle("m", holder, 100)  # 100 tokens stay in the window for a minute
        big = asyncio.ensure_future(limiter.acquire("m", 900, None, 1000))  # needs that minute to pass
        await asyncio.sleep(0.05)
        small = asyncio.ensure_future(limiter.acquire("m", 10, None, 1000))  # would fit at once
        await asyncio.sleep(1.0)
        overtaken = small.done()
        big.cancel()  # the first in line gives up: the next one goes at once
        await asyncio.wait_for(small, 2)
        return overtaken, await limiter.stats()

    overtaken, stats = asyncio.run(main())
    assert not overtaken, "a small request does not overtake a big one that came first (no starvation)"
    assert stats["m"]["waiting"] == 0 and stats["m"]["granted"] == 2


def test_progress_shows_the_learned_limits_the_429s_and_the_waiting_calls():
    import io

    from rich.console import Console

    from graphrag_ray.exec.progress import describe_limits, progress_bar, watching_limits

    limiter = LocalRateLimiter()
    limiter.learn("gpt-4o-mini", None, None, 150, 15000)
    for _ in range(40):
        limiter._registry.queue("gpt-4o-mini", None, None).window.grant(10)
    limiter.refused("gpt-4o-mini", 0.0, None, None)
    line = describe_limits(limiter.snapshot())
    tpm, rpm = 15000 * HEADROOM * 0.7, 150 * HEADROOM * 0.7  # a 429 lowered the allowed rates by 30 %
    assert line == f"gpt-4o-mini: {tpm:,.0f} TPM / {rpm:,.0f} RPM (learned), 1 x 429 (2.5%)"
    with progress_bar(True, Console(file=io.StringIO(), width=200)) as progress:
        with watching_limits(progress, limiter):
            time.sleep(2.5)
        shown = [str(r) for r in progress.get_renderables()][-1]
    assert shown == f"rate limits - {line}"
