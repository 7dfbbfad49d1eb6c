"""Counters and latency histograms a node keeps: the seed's SLIs.

A client's data request is counted once, by the node it was sent to, when its answer goes out
(host/executor.py): by outcome ("ok" or the failure's error code), and if it succeeded, its latency
from its arrival at that node to its answer (after the sync its durability waits for). The success
ratio judges the service: input the store refuses (`CALLER_FAULTS`) is the client's error, counted
under its outcome but not as a request the service failed.

Latencies go into log-spaced buckets (about 2% wide), so histograms from many nodes merge exactly
and percentiles cost O(buckets), whatever the number of requests.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from bhandar_cli.core.model.errors import REFUSED_INPUT

_BASE = 1.02
_LOG_BASE = math.log(_BASE)
_MIN_MS = 0.001

OK = "ok"  # the outcome of a request that succeeded; a failed one's is its error code
# Outcomes that are the client's fault, left out of the success ratio (the SLO's "total").
CALLER_FAULTS = REFUSED_INPUT


class Histogram:
    """Mergeable latency histogram in milliseconds."""

    __slots__ = ("buckets", "count", "max_ms", "total_ms")

    def __init__(self) -> None:
        self.buckets: Counter[int] = Counter()
        self.count = 0
        self.total_ms = 0.0
        self.max_ms = 0.0

    def record(self, ms: float) -> None:
        self.buckets[int(math.log(max(ms, _MIN_MS) / _MIN_MS) / _LOG_BASE)] += 1
        self.count += 1
        self.total_ms += ms
        if ms > self.max_ms:
            self.max_ms = ms

    def merge(self, other: Histogram) -> None:
        self.buckets.update(other.buckets)
        self.count += other.count
        self.total_ms += other.total_ms
        self.max_ms = max(self.max_ms, other.max_ms)

    def cumulative(self, edges_ms: list[float]) -> list[int]:
        """How many observations fall at or below each edge (ascending), exactly when every edge
        is a bucket edge (`bucket_edge`), as Prometheus histogram buckets count them."""
        counts = sorted(self.buckets.items())
        out: list[int] = []
        seen = 0
        i = 0
        for edge in edges_ms:
            while i < len(counts) and _MIN_MS * _BASE ** (counts[i][0] + 1) <= edge * (1 + 1e-9):
                seen += counts[i][1]
                i += 1
            out.append(seen)
        return out

    def percentile(self, p: float) -> float:
        """The bucket's upper edge at or above the p-th percentile (0 when empty)."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(p / 100.0 * self.count))
        seen = 0
        for bucket in sorted(self.buckets):
            seen += self.buckets[bucket]
            if seen >= rank:
                return min(_MIN_MS * _BASE ** (bucket + 1), self.max_ms)
        return self.max_ms


def bucket_edge(ms: float) -> float:
    """The bucket edge nearest `ms`: a histogram's counts at such an edge are exact."""
    return _MIN_MS * _BASE ** round(math.log(ms / _MIN_MS) / _LOG_BASE)


@dataclass
class OpStats:
    """One (operation, level)'s requests: `count` those the success ratio judges (every outcome
    but the client's faults), `ok` those that succeeded, `failures` every other outcome by error
    code (the client's faults included), `latency` of those that succeeded."""

    count: int = 0
    ok: int = 0
    latency: Histogram = field(default_factory=Histogram)
    failures: dict[str, int] = field(default_factory=dict)

    def merge(self, other: OpStats) -> None:
        self.count += other.count
        self.ok += other.ok
        self.latency.merge(other.latency)
        for code, n in other.failures.items():
            self.failures[code] = self.failures.get(code, 0) + n

    def outcomes(self) -> dict[str, int]:
        """Requests by outcome: "ok" and each error code."""
        return {OK: self.ok, **self.failures}


@dataclass
class NodeMetrics:
    """Everything a node counts. `ops` is keyed by (operation, consistency level)."""

    ops: dict[tuple[str, str], OpStats] = field(default_factory=dict)
    read_repairs: int = 0
    stale_reads: int = 0
    hints_stored: int = 0
    hints_delivered: int = 0
    hints_expired: int = 0
    hints_refused: int = 0
    coordinated: int = 0
    replica_requests: int = 0
    forwarded: int = 0
    forward_fallbacks: int = 0  # forwarded puts handed to another coordinator after a timeout
    # Forwarded puts no coordinator stored under the exact dot minted for them: stored as a void
    # (refused by every coordinator), or left as a hint of the put (an unknown outcome).
    exact_dots_voided: int = 0
    exact_dots_left_as_hints: int = 0
    repair_sessions: int = 0
    keys_repaired: int = 0
    tombstones_reaped: int = 0
    values_expired: int = 0  # values of ttl keyspaces turned into tombstones by the expiry sweep
    sibling_limit_exceeded: int = 0  # keys a merge took over the sibling limit (siblings all kept)
    corruptions: dict[str, int] = field(default_factory=dict)  # storage corruption found, by kind

    @property
    def requests(self) -> int:
        """Requests this node served: client requests it coordinated, reads and writes as a replica
        (the load per node)."""
        return self.coordinated + self.replica_requests

    def observe(self, op: str, level: str, outcome: str, ms: float) -> None:
        """One client request answered: `outcome` is OK or the failure's error code; `ms` its
        latency (recorded only for a success)."""
        stats = self.ops.get((op, level))
        if stats is None:
            stats = self.ops[(op, level)] = OpStats()
        if outcome == OK:
            stats.count += 1
            stats.ok += 1
            stats.latency.record(ms)
            return
        if outcome not in CALLER_FAULTS:
            stats.count += 1
        stats.failures[outcome] = stats.failures.get(outcome, 0) + 1

    def merge(self, other: NodeMetrics) -> None:
        for key, stats in other.ops.items():
            self.ops.setdefault(key, OpStats()).merge(stats)
        for kind, n in other.corruptions.items():
            self.corruptions[kind] = self.corruptions.get(kind, 0) + n
        for name in (
            "read_repairs",
            "stale_reads",
            "hints_stored",
            "hints_delivered",
            "hints_expired",
            "hints_refused",
            "coordinated",
            "replica_requests",
            "forwarded",
            "forward_fallbacks",
            "exact_dots_voided",
            "exact_dots_left_as_hints",
            "repair_sessions",
            "keys_repaired",
            "tombstones_reaped",
            "values_expired",
            "sibling_limit_exceeded",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
