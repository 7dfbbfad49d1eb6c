"""The hot-key sketch: bounded, finds the heavy hitter among many keys, and forgets with time."""

from __future__ import annotations

import math
import random

import pytest

from bhandar_cli.core.roles.hot_keys import HotKeys


def test_the_sketch_never_holds_more_than_its_capacity() -> None:
    sketch = HotKeys(capacity=8)
    for i in range(10_000):
        sketch.record(i * 0.001, "kv", f"k{i}")
    assert len(sketch) == 8
    assert len(sketch.top(10.0, 100)) == 8


def test_a_heavy_hitter_among_many_keys_is_found_at_the_top_with_its_rate() -> None:
    rng = random.Random(7)
    sketch = HotKeys(capacity=16, tau=1000.0)
    requests = 20_000
    for i in range(requests):
        key = "hot" if rng.random() < 0.3 else f"k{rng.randrange(5000)}"
        sketch.record(i * 0.01, "kv", key)  # 100 requests a second for 200 s
    now = requests * 0.01
    top = sketch.top(now, 3)
    assert (top[0].keyspace, top[0].key) == ("kv", "hot")
    share = top[0].rate / sketch.total_rate(now)
    assert 0.27 < share < 0.36  # 30% of requests, plus at most its error
    assert top[0].error < top[0].rate / 4
    # The runner-up is a cold key: far below the hot one.
    assert top[1].rate < top[0].rate / 5


def test_rates_read_as_requests_per_second() -> None:
    sketch = HotKeys(tau=5.0)
    for i in range(2000):  # 20 per second for 100 s (20 tau: steady state)
        sketch.record(i * 0.05, "kv", "a" if i % 2 else "b")
    now = 2000 * 0.05
    assert sketch.total_rate(now) == pytest.approx(20.0, rel=0.05)
    assert [e.rate for e in sketch.top(now, 2)] == pytest.approx([10.0, 10.0], rel=0.05)


def test_a_key_that_went_cold_decays_and_a_new_hot_key_overtakes_it() -> None:
    sketch = HotKeys(capacity=4, tau=2.0)
    for i in range(1000):
        sketch.record(i * 0.01, "kv", "old")
    before = sketch.top(10.0, 1)[0].rate
    assert sketch.top(20.0, 1)[0].rate < before * 0.01  # 10 s = 5 tau later: under 1% left
    for i in range(200):
        sketch.record(20.0 + i * 0.01, "kv", "new")
    top = sketch.top(22.0, 2)
    assert top[0].key == "new" and top[1].key == "old"


def test_long_quiet_spells_neither_overflow_nor_resurrect_old_counts() -> None:
    sketch = HotKeys(capacity=4, tau=1.0)
    sketch.record(0.0, "kv", "a")
    for t in (100.0, 10_000.0, 1e7):
        sketch.record(t, "kv", "b")
        top = sketch.top(t, 2)
        assert top[0].key == "b" and top[0].rate == pytest.approx(1.0)
        assert sketch.total_rate(t) == pytest.approx(1.0)


def test_the_plain_view_carries_total_and_keys() -> None:
    sketch = HotKeys()
    sketch.record(1.0, "cache", "x")
    view = sketch.view(1.0)
    assert view["keys"] == [{"keyspace": "cache", "key": "x", "rate": 0.1, "error": 0.0}]
    assert view["total_rate"] == 0.1


def test_the_sketch_is_exactly_space_saving() -> None:
    """The same counters as the textbook algorithm (evict the smallest count, ties by key)."""
    rng = random.Random(3)
    sketch = HotKeys(capacity=10, tau=50.0)
    counts: dict[tuple[str, str], float] = {}
    for i in range(5000):
        now = i * 0.01
        key = f"k{int(60 * rng.random() ** 2)}"
        sketch.record(now, "kv", key)
        weight = math.exp(now / 50.0)  # what one request weighs (no rebase within 30 tau)
        item = ("kv", key)
        if item in counts:
            counts[item] += weight
        elif len(counts) < 10:
            counts[item] = weight
        else:
            victim = min(counts, key=lambda k: (counts[k], k))
            counts[item] = counts.pop(victim) + weight
    scale = math.exp(-50.0 / 50.0) / 50.0
    expected = sorted(((k, c * scale) for k, c in counts.items()), key=lambda kc: (-kc[1], kc[0]))
    got = [((e.keyspace, e.key), e.rate) for e in sketch.top(50.0, 10)]
    assert [k for k, _ in got] == [k for k, _ in expected]
    assert [r for _, r in got] == pytest.approx([r for _, r in expected])
