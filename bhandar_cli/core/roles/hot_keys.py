"""Hot keys: a bounded heavy-hitters sketch of the client requests a node receives, per key.

Space-saving (Metwally et al.): `capacity` counters; a key without one takes the smallest counter
over, inheriting its count as its possible overestimate (`error`). Any key whose true count is
above total/capacity is always held, so the keys that matter for load (a key with a tenth of all
requests) are found with 64 counters whatever the number of keys.

Counts decay exponentially with the `now` the core is handed (time constant `tau` seconds), so a
count reads as a rate: a steady stream of r requests per second settles at r * tau, and a key that
went cold fades out instead of holding its counter forever. Decay is applied by growing the weight
of new requests rather than shrinking every counter (one multiplication per request); the weights
are brought back to 1 now and then so they never overflow.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

HotKey = tuple[str, str]  # (keyspace, key)

CAPACITY = 64
SHOWN = 32  # keys a node's status view carries (what `hot` combines across nodes)
TAU = 10.0  # seconds: a request counts for about this long (e^-1 after tau)
_RESCALE = 30.0  # exponent (weight e^30) at which every counter is brought back to the present


@dataclass(frozen=True, slots=True)
class HotEntry:
    """One key of the sketch: its request rate (an upper bound) and how much of it may be error."""

    keyspace: str
    key: str
    rate: float  # requests per second, decayed
    error: float  # requests per second the rate may overstate (inherited from the evicted key)


class HotKeys:
    """A space-saving sketch of (keyspace, key) request rates, decaying with time."""

    __slots__ = ("_counts", "_errors", "_heap", "_origin", "_total", "capacity", "tau")

    def __init__(self, capacity: int = CAPACITY, tau: float = TAU) -> None:
        if capacity < 1 or tau <= 0:
            raise ValueError("a hot-key sketch needs capacity >= 1 and tau > 0")
        self.capacity = capacity
        self.tau = tau
        self._counts: dict[HotKey, float] = {}
        self._errors: dict[HotKey, float] = {}
        # One (count, key) per key, the count as of when it was pushed: counts only grow, so an
        # entry is at most stale-low, and finding the smallest counter costs O(log capacity)
        # amortized instead of a scan of every counter on each new key.
        self._heap: list[tuple[float, HotKey]] = []
        self._total = 0.0
        # The time at which a request weighs 1; one at `now` weighs e^((now - origin) / tau).
        self._origin: float | None = None

    def __len__(self) -> int:
        return len(self._counts)

    def record(self, now: float, keyspace: str, key: str) -> None:
        """One client request for the key at `now`."""
        weight = self._advance(now)
        self._total += weight
        item = (keyspace, key)
        counts = self._counts
        count = counts.get(item)
        if count is not None:
            counts[item] = count + weight
            return
        heap = self._heap
        if len(counts) < self.capacity:
            counts[item] = weight
            self._errors[item] = 0.0
            heapq.heappush(heap, (weight, item))
            return
        while True:  # the smallest counter: refresh stale entries until the top is current
            pushed, victim = heap[0]
            floor = counts[victim]
            if floor == pushed:
                break
            heapq.heapreplace(heap, (floor, victim))
        del counts[victim], self._errors[victim]
        counts[item] = floor + weight
        self._errors[item] = floor
        heapq.heapreplace(heap, (floor + weight, item))

    def top(self, now: float, n: int = 10) -> list[HotEntry]:
        """The `n` keys with the highest rates at `now`, highest first."""
        scale = self._scale(now)
        ranked = sorted(self._counts.items(), key=lambda kv: (-kv[1], kv[0]))[: max(0, n)]
        return [
            HotEntry(ks, key, count * scale, self._errors[(ks, key)] * scale) for (ks, key), count in ranked
        ]

    def total_rate(self, now: float) -> float:
        """Requests per second over every key (decayed like the counters)."""
        return self._total * self._scale(now)

    def _scale(self, now: float) -> float:
        """What a stored count is multiplied by to read as requests per second at `now`."""
        if self._origin is None:
            return 0.0
        # A count is in units of the weight at `origin`; at `now` it has decayed by e^-(now-origin)/tau.
        return math.exp(-max(0.0, now - self._origin) / self.tau) / self.tau

    def _advance(self, now: float) -> float:
        if self._origin is None:
            self._origin = now
        exponent = max(0.0, now - self._origin) / self.tau
        if exponent > _RESCALE:
            # Rebase every counter on `now` (after a long quiet spell they underflow to 0, as
            # they should): the weight of a request is 1 again, and exp never overflows.
            factor = math.exp(-exponent)
            self._counts = {k: c * factor for k, c in self._counts.items()}
            self._errors = {k: e * factor for k, e in self._errors.items()}
            self._total *= factor
            self._heap = [(c, k) for k, c in self._counts.items()]
            heapq.heapify(self._heap)
            self._origin, exponent = now, 0.0
        return math.exp(exponent)

    def view(self, now: float, n: int = SHOWN) -> dict[str, object]:
        """Plain form for status views: the total rate and the top `n` keys."""
        return {
            "total_rate": round(self.total_rate(now), 3),
            "keys": [
                {"keyspace": e.keyspace, "key": e.key, "rate": round(e.rate, 3), "error": round(e.error, 3)}
                for e in self.top(now, n)
            ],
        }
