from __future__ import annotations

from raycluster_operator.controller.runtime.ratelimit import TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_burst_is_spent_without_waiting_then_requests_are_paced_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=100, burst=200, clock=clock)
    assert all(bucket.reserve() == 0.0 for _ in range(200))
    assert bucket.reserve() == 0.01
    assert bucket.reserve() == 0.02


def test_tokens_refill_with_time_up_to_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=5, clock=clock)
    for _ in range(5):
        bucket.reserve()
    clock.now = 0.3
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() > 0
    clock.now = 100.0
    assert sum(1 for _ in range(10) if bucket.reserve() == 0.0) == 5


def test_zero_qps_means_unlimited() -> None:
    bucket = TokenBucket(qps=0, burst=1, clock=FakeClock())
    assert all(bucket.reserve() == 0.0 for _ in range(1000))
