"""The phi accrual failure detector: how suspicious a peer's silence is, as a number.

This module owns the per-peer statistics of heartbeat arrivals and the suspicion level phi
derived from them (Hayashibara et al., "The φ Accrual Failure Detector", 2004; the variant below is
Akka's `PhiAccrualFailureDetector`, which Cassandra's detector also follows in spirit). It decides
nothing about ownership: gossip uses `is_up` for routing only. Time is passed in
as float seconds, so the simulator and the trio runtime drive it alike.

Model. Heartbeat inter-arrival times are taken as normally distributed with the mean and standard
deviation of the last `max_sample_size` intervals. After `t` seconds of silence,

    phi(t) = -log10(P(an interval longer than t))

so phi = 1 means about a 10% chance that the peer is merely late, phi = 8 one in 10**8.
`acceptable_heartbeat_pause` is added to the mean, so that much extra silence (a GC pause, a lost
gossip round) costs little suspicion; the standard deviation is floored at `min_std_deviation`,
since perfectly regular heartbeats (as in the simulator) would otherwise give a zero deviation and
make phi jump from 0 to infinity at the first late heartbeat. Before the first interval is known,
the history is seeded with two intervals of `first_heartbeat_estimate` ± a quarter (Akka does the
same), giving mean = estimate and deviation = estimate / 4.

What enters the history. Only intervals that measure how late a peer's heartbeats run while it is
reachable: an interval is left out when it ends a suspicion (phi had reached the threshold when the
heartbeat came: Akka's `PhiAccrualFailureDetector.heartbeat` does the same) or when it is longer
than `max_interval_rounds` expected intervals (Cassandra's `ArrivalWindow` ignores intervals over
`fd_max_interval_ms`, 2 s by default, twice its gossip interval). Without that, the 60 s of a
healed partition became one sample: the mean rose to about 6 s and the deviation to about 17 s, so
a peer that crashed a few seconds after the heal was suspected only after about 95 s of silence
instead of 2. A long silence is news of an outage, not of the network's jitter.

Tail approximation. Akka uses a logistic approximation of the normal CDF (Bowling et al. 2009,
max error about 1.4e-4):  P(X > t) ≈ 1 / (1 + e**z)  with  y = (t - mean) / std  and
z = y * (1.5976 + 0.070566 * y**2). With the exact CDF, ``1 - cdf(y)`` rounds to 0.0 from y ≈ 8.3,
so phi would be stuck at infinity after a few deviations of silence. The logistic form avoids
that subtraction, but evaluated literally as Akka does, e**-z still underflows to 0 for y above
about 21.5 (phi infinite) and e**z overflows below y ≈ -21.5 (Python raises OverflowError where
the JVM returns infinity). Taking the logarithm analytically instead,

    phi = log10(1 + e**z) = (max(z, 0) + log1p(e**-|z|)) / ln 10,

which never raises, stays finite until y**3 itself overflows (y ~ 1e102), grows smoothly (about
y**3 / 33 for large y) and is strictly increasing in t, so a silent peer's phi rises monotonically.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache

DEFAULT_THRESHOLD = 8.0  # Cassandra's phi_convict_threshold and Akka cluster's default


@dataclass(frozen=True)
class PhiConfig:
    """Tuning of a failure detector (seconds throughout)."""

    threshold: float = DEFAULT_THRESHOLD
    max_sample_size: int = 1000
    min_std_deviation: float = 0.1
    # Akka's cluster default is 3 s; 1 s keeps a classroom demo lively (a node stopped after steady
    # 1 s heartbeats is suspected after about 2.5 s) while tolerating one lost gossip round.
    acceptable_heartbeat_pause: float = 1.0
    first_heartbeat_estimate: float = 1.0
    # The longest interval recorded, in expected intervals: 4 x 0.5 s gossip rounds is Cassandra's
    # 2 s. Longer silences are outages (a partition, a paused process), not jitter to adapt to.
    max_interval_rounds: float = 4.0

    def __post_init__(self) -> None:
        if self.threshold <= 0:
            raise ValueError("threshold must be positive")
        if self.max_sample_size < 1:
            raise ValueError("max_sample_size must be at least 1")
        if self.min_std_deviation <= 0:
            raise ValueError("min_std_deviation must be positive")
        if self.acceptable_heartbeat_pause < 0:
            raise ValueError("acceptable_heartbeat_pause must not be negative")
        if self.first_heartbeat_estimate <= 0:
            raise ValueError("first_heartbeat_estimate must be positive")
        if self.max_interval_rounds < 1:
            raise ValueError("max_interval_rounds must be at least 1")

    @property
    def max_interval(self) -> float:
        """The longest inter-arrival time that enters the history (seconds)."""
        return self.max_interval_rounds * self.first_heartbeat_estimate


def phi_of(elapsed: float, mean: float, std_deviation: float) -> float:
    """phi after `elapsed` seconds of silence for intervals ~ Normal(mean, std_deviation)."""
    y = (elapsed - mean) / std_deviation
    z = y * (1.5976 + 0.070566 * y * y)
    return (max(z, 0.0) + math.log1p(math.exp(-abs(z)))) / math.log(10.0)


@lru_cache(maxsize=16)
def threshold_deviations(threshold: float) -> float:
    """The y (deviations of silence past the mean) at which phi reaches `threshold`.

    phi = log10(1 + e**z) inverts to z = ln(10**threshold - 1), computed as a + ln(1 - e**-a) with
    a = threshold * ln 10 so that it neither overflows nor cancels; then y * (1.5976 + 0.070566 y**2)
    = z is a cubic with one real root (its slope is always positive): Cardano's formula, polished by
    two Newton steps to the last bits. Failure detection asks this at every heartbeat, so it is
    solved once per threshold instead of by bisection over phi each time.
    """
    a = threshold * math.log(10.0)
    z = a + math.log(-math.expm1(-a))
    p, q = 1.5976 / 0.070566, -z / 0.070566
    root = math.sqrt(q * q / 4 + p * p * p / 27)
    y = math.cbrt(-q / 2 + root) + math.cbrt(-q / 2 - root)
    for _ in range(2):
        y -= (0.070566 * y**3 + 1.5976 * y - z) / (3 * 0.070566 * y * y + 1.5976)
    return y


class PhiAccrualDetector:
    """The detector for one peer."""

    def __init__(self, config: PhiConfig | None = None) -> None:
        self.config = config or PhiConfig()
        self._intervals: deque[float] = deque()
        # Running sums make each heartbeat O(1), as in Akka's HeartbeatHistory.
        self._sum = 0.0
        self._sum_sq = 0.0
        self.last_heartbeat: float | None = None
        self._down_at: float | None = None  # when phi crosses the threshold, if no heartbeat comes
        estimate = self.config.first_heartbeat_estimate
        self._add(estimate - estimate / 4)
        self._add(estimate + estimate / 4)

    def _add(self, interval: float) -> None:
        if len(self._intervals) >= self.config.max_sample_size:
            old = self._intervals.popleft()
            self._sum -= old
            self._sum_sq -= old * old
        self._intervals.append(interval)
        self._sum += interval
        self._sum_sq += interval * interval

    def heartbeat(self, now: float) -> bool:
        """Record a heartbeat received at `now`. Returns whether the interval since the last one
        entered the history: not when it ended a suspicion or is longer than the config's
        `max_interval` (see the module docstring); the heartbeat counts either way."""
        last = self.last_heartbeat
        recorded = False
        if last is not None:
            if now < last:
                raise ValueError(f"heartbeat at {now} is earlier than the previous one at {last}")
            interval = now - last
            if interval <= self.config.max_interval and self.is_available(now):
                self._add(interval)
                recorded = True
        self.last_heartbeat = now
        self._down_at = None
        return recorded

    @property
    def samples(self) -> int:
        """Intervals in the window (the two bootstrap ones included until they age out)."""
        return len(self._intervals)

    @property
    def mean(self) -> float:
        return self._sum / len(self._intervals)

    @property
    def std_deviation(self) -> float:
        """The window's population standard deviation, before the minimum is applied."""
        mean = self.mean
        # max(): rounding in the running sums can leave a tiny negative variance.
        return math.sqrt(max(self._sum_sq / len(self._intervals) - mean * mean, 0.0))

    def phi(self, now: float) -> float:
        """Suspicion at `now`; 0.0 before the first heartbeat (nothing to be late for)."""
        if self.last_heartbeat is None:
            return 0.0
        cfg = self.config
        mean = self.mean + cfg.acceptable_heartbeat_pause
        std = max(self.std_deviation, cfg.min_std_deviation)
        return phi_of(now - self.last_heartbeat, mean, std)

    def is_available(self, now: float, threshold: float | None = None) -> bool:
        """phi below the threshold (the config's, 8 by default)."""
        if threshold is not None and threshold != self.config.threshold:
            return self.phi(now) < threshold
        if self.last_heartbeat is None:
            return True
        # phi only grows with silence, so between heartbeats "up" is simply "before the moment phi
        # reaches the threshold". Routing asks this for every request; the moment is computed once.
        if self._down_at is None:
            self._down_at = self._crossing(self.config.threshold)
        return now < self._down_at

    def down_at(self) -> float:
        """When phi reaches the config's threshold if no heartbeat comes (inf before the first)."""
        if self.last_heartbeat is None:
            return math.inf
        if self._down_at is None:
            self._down_at = self._crossing(self.config.threshold)
        return self._down_at

    def _crossing(self, threshold: float) -> float:
        """The time after the last heartbeat at which phi reaches `threshold`: mean + y * std, where
        y, the threshold in deviations, depends on the threshold alone."""
        assert self.last_heartbeat is not None
        cfg = self.config
        mean = self.mean + cfg.acceptable_heartbeat_pause
        std = max(self.std_deviation, cfg.min_std_deviation)
        return self.last_heartbeat + mean + threshold_deviations(threshold) * std


class PhiDetectors:
    """One detector per peer, keyed by peer id.

    A peer never heard from has phi 0 and is up (Akka's registry does the same): the detector
    judges silence after contact, and membership decides who exists.
    """

    def __init__(self, config: PhiConfig | None = None) -> None:
        self.config = config or PhiConfig()
        self._detectors: dict[str, PhiAccrualDetector] = {}

    def heartbeat(self, peer: str, now: float) -> None:
        detector = self._detectors.get(peer)
        if detector is None:
            detector = self._detectors[peer] = PhiAccrualDetector(self.config)
        detector.heartbeat(now)

    def phi(self, peer: str, now: float) -> float:
        detector = self._detectors.get(peer)
        return 0.0 if detector is None else detector.phi(now)

    def is_up(self, peer: str, now: float) -> bool:
        detector = self._detectors.get(peer)
        return detector is None or detector.is_available(now)

    def retune(self, threshold: float, pause: float, first_estimate: float) -> None:
        """New tuning for every detector, kept and future: a configuration change at runtime.
        Each peer's history stays; its moment of suspicion is computed anew."""
        self.config = replace(
            self.config,
            threshold=threshold,
            acceptable_heartbeat_pause=pause,
            first_heartbeat_estimate=first_estimate,
        )
        for detector in self._detectors.values():
            detector.config = self.config
            detector._down_at = None

    def down_at(self, peer: str) -> float:
        """When `peer` turns down by the threshold if no heartbeat comes (inf: never)."""
        detector = self._detectors.get(peer)
        return math.inf if detector is None else detector.down_at()

    def forget(self, peer: str) -> None:
        """Stop tracking `peer` (it left the cluster)."""
        self._detectors.pop(peer, None)

    def reset(self, peer: str, now: float | None = None) -> None:
        """Start `peer`'s statistics afresh (it restarted with a new generation, so the gap of its
        downtime must not count as an inter-arrival time); with `now`, that is its first heartbeat."""
        self._detectors[peer] = PhiAccrualDetector(self.config)
        if now is not None:
            self._detectors[peer].heartbeat(now)

    def detector(self, peer: str) -> PhiAccrualDetector | None:
        return self._detectors.get(peer)

    def __contains__(self, peer: object) -> bool:
        return peer in self._detectors

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._detectors))

    def __len__(self) -> int:
        return len(self._detectors)
