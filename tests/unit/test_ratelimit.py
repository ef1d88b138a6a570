from graphrag_ray.llm.ratelimit import TokenBuckets


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_reservations_queue_in_order_and_respect_tpm():
    clock = Clock()
    buckets = TokenBuckets(rpm=None, tpm=600, clock=clock)  # 10 tokens/s, 600 burst
    assert buckets.reserve(600) == 0.0          # the full minute's burst is available at once
    assert buckets.reserve(100) == 10.0         # then 100 tokens cost 10 s of refill
    assert buckets.reserve(100) == 20.0         # the next waiter is queued behind the first
    clock.t = 20.0
    assert buckets.reserve(1) == 0.1


def test_reconcile_returns_unused_reservation():
    clock = Clock()
    buckets = TokenBuckets(rpm=None, tpm=600, clock=clock)
    buckets.reserve(600)
    buckets.reconcile(reserved=600, actual=100)  # the call used only 100 tokens
    assert buckets.reserve(500) == 0.0


def test_rpm_limits_requests_and_pause_stops_everyone():
    clock = Clock()
    buckets = TokenBuckets(rpm=60, tpm=None, clock=clock)
    for _ in range(60):
        assert buckets.reserve(1) == 0.0
    assert buckets.reserve(1) == 1.0
    buckets.pause(5.0)
    assert buckets.reserve(1) >= 5.0  # a 429 holds back every caller, not only the refused one


def test_oversized_request_is_capped_to_the_bucket():
    buckets = TokenBuckets(rpm=None, tpm=100, clock=Clock())
    assert buckets.reserve(10_000) == 0.0  # never waits forever: capped at one minute's worth
