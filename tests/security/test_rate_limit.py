"""Token buckets on a fake clock: a burst passes, the next request waits the time one request
takes to refill, and a client that slows down to the rate always passes."""

from __future__ import annotations

import pytest

from bhandar_cli.core.model.access_tokens import TokenRecord
from bhandar_cli.security.rate_limit import RateLimiter, TokenBucket

DIGEST = "ab" * 32


def test_a_burst_passes_then_the_next_waits_for_one_refill() -> None:
    bucket = TokenBucket.full(rate=2.0, burst=4, now=100.0)
    assert [bucket.take(100.0) for _ in range(4)] == [0.0] * 4
    assert bucket.take(100.0) == pytest.approx(0.5)
    assert bucket.take(100.25) == pytest.approx(0.25)  # half refilled
    assert bucket.take(100.5) == 0.0


def test_a_client_at_the_rate_always_passes_and_idle_time_refills_only_to_the_burst() -> None:
    bucket = TokenBucket.full(rate=10.0, burst=1, now=0.0)
    assert all(bucket.take(i * 0.1) == 0.0 for i in range(100))
    assert bucket.take(1000.0) == 0.0
    assert bucket.take(1000.0) > 0  # a long pause saved one request, not thousands


def test_the_limiter_limits_only_tokens_with_a_rate_and_each_on_its_own() -> None:
    limiter = RateLimiter()
    free = TokenRecord("a1a1a1a1", DIGEST, (("kv", "read"),))
    slow = TokenRecord("b2b2b2b2", DIGEST, (("kv", "read"),), rate=1.0, burst=2)
    other = TokenRecord("c3c3c3c3", DIGEST, (("kv", "read"),), rate=1.0)
    assert all(limiter.admit(free, 0.0) == 0.0 for _ in range(1000))
    assert [limiter.admit(slow, 0.0) for _ in range(2)] == [0.0, 0.0]
    assert limiter.admit(slow, 0.0) == pytest.approx(1.0)
    assert limiter.admit(other, 0.0) == 0.0  # burst 0: one second's worth, at least one
    assert limiter.admit(other, 0.0) == pytest.approx(1.0)
    assert limiter.admit(slow, 1.0) == 0.0
