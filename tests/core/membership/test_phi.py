"""Phi accrual failure detector: quiet while heartbeats flow, a stated detection bound after.

The bound with the defaults (threshold 8, acceptable pause 1 s, minimum deviation 0.1 s), after
steady 1 s heartbeats: the mean interval is 1 s, plus the 1 s pause makes 2 s; the measured
deviation (~0.045 s) is floored to 0.1 s. phi = log10(1 + e**z) reaches 8 at z = ln(10**8 - 1)
= 18.4207, and z = y * (1.5976 + 0.070566 * y**2) gives y = 5.2259 deviations, so the peer is
suspected 2 + 5.2259 * 0.1 = 2.5226 s after its last heartbeat.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bhandar_cli.core.membership.phi import PhiAccrualDetector, PhiConfig, PhiDetectors, phi_of

STEADY_BOUND = 2.5226  # seconds of silence before phi reaches 8 (see the module docstring)


def steady(count: int, interval: float = 1.0, config: PhiConfig | None = None) -> PhiAccrualDetector:
    detector = PhiAccrualDetector(config)
    for i in range(count):
        detector.heartbeat(i * interval)
    return detector


def crossing_time(detector: PhiAccrualDetector, threshold: float = 8.0) -> float:
    """Seconds after the last heartbeat at which phi first reaches `threshold` (bisection)."""
    assert detector.last_heartbeat is not None
    lo, hi = 0.0, 1000.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if detector.phi(detector.last_heartbeat + mid) >= threshold else (mid, hi)
    return hi


def test_steady_heartbeats_keep_phi_low() -> None:
    detector = PhiAccrualDetector()
    for i in range(200):
        now = float(i)
        if i:
            # Just before each heartbeat, a full interval has passed: still no suspicion.
            assert detector.phi(now) < 0.01
            assert detector.is_available(now)
        detector.heartbeat(now)
        assert detector.phi(now) < 1e-6


def test_silence_raises_phi_monotonically_past_the_stated_bound() -> None:
    detector = steady(61)
    last = 60.0
    previous = detector.phi(last)
    for step in range(1, 1000):
        current = detector.phi(last + step * 0.01)
        assert current >= previous
        previous = current
    assert detector.is_available(last + STEADY_BOUND - 0.001)
    assert not detector.is_available(last + STEADY_BOUND + 0.001)
    assert crossing_time(detector) == pytest.approx(STEADY_BOUND, abs=1e-4)


def test_derivation_of_the_bound() -> None:
    # The docstring's arithmetic, checked against the formula itself.
    z = math.log(10**8 - 1)
    y = 5.2259
    assert y * (1.5976 + 0.070566 * y * y) == pytest.approx(z, abs=1e-3)
    assert phi_of(2.0 + y * 0.1, 2.0, 0.1) == pytest.approx(8.0, abs=1e-3)


def test_jittery_heartbeats_widen_the_bound() -> None:
    rng = random.Random(7)
    detector = PhiAccrualDetector()
    now = 0.0
    for _ in range(500):
        detector.heartbeat(now)
        interval = rng.uniform(0.5, 1.5)
        assert detector.is_available(now + interval)  # jitter alone never convicts
        now += interval
    detector.heartbeat(now)
    # Uniform(0.5, 1.5) has deviation 1/sqrt(12) = 0.289 s: the bound becomes about
    # 1 + 1 + 5.2259 * 0.289 = 3.51 s instead of 2.52 s.
    assert detector.std_deviation == pytest.approx(1 / math.sqrt(12), rel=0.1)
    expected = detector.mean + 1.0 + 5.2259 * detector.std_deviation
    assert crossing_time(detector) == pytest.approx(expected, abs=1e-3)
    assert 3.3 < crossing_time(detector) < 3.7


def test_a_heartbeat_after_a_long_pause_brings_phi_back_down_and_leaves_the_history_alone() -> None:
    detector = steady(30)
    assert detector.phi(29 + 30.0) > 100
    assert detector.heartbeat(29 + 30.0) is False  # the 30 s gap is an outage, not a sample
    assert detector.phi(29 + 30.0) == pytest.approx(0.0, abs=1e-6)
    assert detector.is_available(29 + 31.0)
    assert detector.samples == 31 and detector.mean == pytest.approx(1.0)
    # Silent again: suspected as soon as before the pause, not after minutes.
    assert crossing_time(detector) == pytest.approx(STEADY_BOUND, abs=1e-3)


def test_a_crash_after_a_healed_partition_is_suspected_within_the_steady_bound() -> None:
    """Issue 38, the arrival pattern C had of B on a real clock (gossip every 0.5 s): heartbeats
    every 0.5 s, then nothing for the 59.665 s of a partition, then the first two at once (one
    second-hand, one from B itself, 1 ms apart), 4 s of heartbeats, and B crashes. Before, the
    59.665 s gap became a sample (mean 5.8 s, deviation 17 s) and C suspected B only about 95 s
    after its last heartbeat; it must take no longer than with no partition at all."""
    config = PhiConfig(acceptable_heartbeat_pause=0.5, first_heartbeat_estimate=0.5)
    detector, plain = PhiAccrualDetector(config), PhiAccrualDetector(config)
    now = 0.0
    for beat in range(3):
        now = beat * 0.5
        detector.heartbeat(now)
    now += 59.665
    arrivals = [now, now + 0.001, *(now + 0.001 + 0.5 * i for i in range(1, 9))]
    for at in arrivals:
        detector.heartbeat(at)
    for at in [0.5 * i for i in range(3 + len(arrivals))]:
        plain.heartbeat(at)
    assert detector.samples == 2 + 2 + len(arrivals) - 1  # everything but the partition's gap
    # About 1.5 s with no partition; 1.7 s after it (the burst's 1 ms interval widens the
    # deviation a little); 95 s when the gap was a sample.
    assert crossing_time(plain) < 2.0
    assert crossing_time(detector) < 2.0


def test_an_interval_that_ends_a_suspicion_is_not_recorded() -> None:
    """Akka's rule: a heartbeat that arrives when phi is already past the threshold restarts the
    clock but measures an outage, so it does not enter the history (even below `max_interval`)."""
    config = PhiConfig(max_interval_rounds=100.0)
    detector = steady(20, config=config)
    assert not detector.is_available(19 + 3.0)
    assert detector.heartbeat(19 + 3.0) is False
    assert detector.heartbeat(19 + 4.0) is True
    assert detector.samples == 2 + 19 + 1


def test_intervals_longer_than_max_interval_are_not_recorded() -> None:
    """Cassandra's rule: even while phi is below the threshold (a lenient threshold here), a
    silence longer than `max_interval_rounds` expected intervals is not learnt as normal."""
    config = PhiConfig(threshold=1000.0, first_heartbeat_estimate=1.0, max_interval_rounds=4.0)
    assert config.max_interval == 4.0
    detector = steady(20, config=config)
    assert detector.is_available(19 + 4.5)
    assert detector.heartbeat(19 + 4.5) is False
    assert detector.heartbeat(19 + 4.5 + 4.0) is True  # exactly max_interval still counts
    assert max(detector._intervals) == 4.0


def test_phi_never_overflows() -> None:
    detector = steady(10)
    far = detector.phi(1e12)
    assert math.isfinite(far) and far > 1e30
    assert detector.phi(-1e12) == 0.0  # a clock before the last heartbeat: no suspicion
    assert math.isfinite(phi_of(1e90, 1.0, 0.1))
    assert phi_of(1e300, 1.0, 0.1) == math.inf  # y**3 overflows: infinity, not an exception


def test_logistic_approximation_tracks_the_normal_tail() -> None:
    for tenth in range(-30, 31):
        y = tenth / 10
        exact = -math.log10(0.5 * math.erfc(y / math.sqrt(2)))
        assert phi_of(y, 0.0, 1.0) == pytest.approx(exact, abs=0.05)
    assert phi_of(2.0, 2.0, 0.5) == pytest.approx(math.log10(2))


@given(
    intervals=st.lists(st.floats(0.0, 10.0), min_size=0, max_size=30),
    a=st.floats(0.0, 100.0),
    b=st.floats(0.0, 100.0),
)
def test_phi_is_monotone_in_silence(intervals: list[float], a: float, b: float) -> None:
    detector = PhiAccrualDetector()
    now = 0.0
    detector.heartbeat(now)
    for interval in intervals:
        now += interval
        detector.heartbeat(now)
    early, late = sorted((a, b))
    assert 0.0 <= detector.phi(now + early) <= detector.phi(now + late)
    assert math.isfinite(detector.phi(now + late))


def test_first_heartbeat_bootstraps_from_the_estimate() -> None:
    detector = PhiAccrualDetector(PhiConfig(first_heartbeat_estimate=2.0))
    assert detector.phi(123.0) == 0.0  # nothing heard yet, nothing to be late for
    detector.heartbeat(0.0)
    assert (detector.mean, detector.std_deviation) == (2.0, 0.5)
    # mean 2 + pause 1 = 3 s, deviation 0.5 s: suspected 3 + 5.2259 * 0.5 s after the only beat.
    assert crossing_time(detector) == pytest.approx(3 + 5.2259 * 0.5, abs=1e-3)


def test_window_is_bounded_and_forgets_the_bootstrap() -> None:
    detector = steady(50, interval=2.0, config=PhiConfig(max_sample_size=10))
    assert detector.samples == 10
    assert detector.mean == pytest.approx(2.0)
    assert detector.std_deviation == pytest.approx(0.0, abs=1e-6)


def test_time_going_backwards_is_a_caller_bug() -> None:
    detector = steady(3)
    with pytest.raises(ValueError, match="earlier than the previous"):
        detector.heartbeat(1.5)


@pytest.mark.parametrize(
    "bad",
    [
        {"threshold": 0},
        {"max_sample_size": 0},
        {"min_std_deviation": 0},
        {"acceptable_heartbeat_pause": -1},
        {"first_heartbeat_estimate": 0},
        {"max_interval_rounds": 0.5},
    ],
)
def test_config_is_validated(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        PhiConfig(**bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ per peer


def test_detectors_per_peer() -> None:
    detectors = PhiDetectors()
    assert detectors.phi("B", 100.0) == 0.0 and detectors.is_up("B", 100.0)  # never heard of
    for i in range(20):
        detectors.heartbeat("B", float(i))
        detectors.heartbeat("C", float(i))
    detectors.heartbeat("C", 20.0)
    assert list(detectors) == ["B", "C"] and len(detectors) == 2
    now = 19 + STEADY_BOUND + 0.01
    assert not detectors.is_up("B", now)
    assert detectors.is_up("C", now)
    assert detectors.phi("B", now) > 8 > detectors.phi("C", now)
    detectors.forget("B")
    assert "B" not in detectors and detectors.is_up("B", now)


def test_reset_discards_the_downtime_of_a_restarted_peer() -> None:
    plain, reset = PhiDetectors(), PhiDetectors()
    for detectors in (plain, reset):
        for i in range(20):
            detectors.heartbeat("B", float(i))
    plain.heartbeat("B", 500.0)  # the 481 s outage is left out of the old life's history...
    reset.reset("B", 500.0)  # ...and the new generation starts afresh
    for detectors in (plain, reset):
        for i in range(1, 5):
            detectors.heartbeat("B", 500.0 + i)
    # Stopped again at 504: either way it is suspected within seconds.
    assert not reset.is_up("B", 504 + 4.0) and not plain.is_up("B", 504 + 4.0)
    fresh, old = reset.detector("B"), plain.detector("B")
    assert fresh is not None and fresh.samples == 2 + 4 and fresh.last_heartbeat == 504.0
    assert old is not None and old.samples == 2 + 19 + 4
    reset.reset("C")
    assert reset.phi("C", 1e6) == 0.0  # reset without a heartbeat: not yet heard from


@given(
    st.floats(0.05, 40.0),
    st.lists(st.floats(0.001, 5.0), min_size=1, max_size=40),
    st.sampled_from((0.2, 0.30103, 1.0, 3.0, 8.0, 16.0, 200.0)),
)
def test_the_moment_a_peer_goes_down_is_where_phi_reaches_the_threshold(
    estimate: float, intervals: list[float], threshold: float
) -> None:
    """The solved crossing agrees with phi itself: just before it phi is under the threshold, just
    after it is not, for any history and threshold (tiny ones put the crossing before the mean)."""
    detector = PhiAccrualDetector(PhiConfig(threshold=threshold, first_heartbeat_estimate=estimate))
    now = 0.0
    for interval in intervals:
        now += interval
        detector.heartbeat(now)
    down_at = detector._crossing(threshold)
    margin = 1e-9 * max(1.0, down_at)
    assert detector.phi(down_at - margin) < threshold <= detector.phi(down_at + margin)
    assert detector.is_available(down_at - margin) and not detector.is_available(down_at + margin)
