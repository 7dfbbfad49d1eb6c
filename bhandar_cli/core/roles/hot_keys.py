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

The cluster's view (`hot`) combines the sketches the nodes' status views carry: rates add up across
the nodes requests entered at, and each key's replicas by the ring carry its load (`hot_view`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bhandar_cli.core.membership import Ring, key_token

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


class HotSketches:
    """The hot-key sketches of the nodes' status views, gathered for `hot_view`."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.rates: dict[tuple[str, str], dict[str, float]] = {}
        self.replication: dict[str, int] = {}

    def add(self, node: str, info: Mapping[str, Any]) -> None:
        """A node's sketch and keyspaces, from its `info` view (core/node_views.py `NodeInfo`)."""
        sketch = info.get("hot") or {}
        self.totals[node] = float(sketch.get("total_rate", 0.0))
        for entry in sketch.get("keys", []):
            self.rates.setdefault((entry["keyspace"], entry["key"]), {})[node] = float(entry["rate"])
        for ks in info.get("keyspaces", []):
            self.replication.setdefault(ks["name"], int(ks["n"]))

    def view(self, ring: Ring, n: int) -> dict[str, Any]:
        return hot_view(ring, self.totals, self.rates, self.replication, n)


def hot_view(
    ring: Ring,
    totals: dict[str, float],
    rates: dict[tuple[str, str], dict[str, float]],
    replication: dict[str, int],
    n: int,
) -> dict[str, Any]:
    """Combine the nodes' sketches: rates add up across the nodes requests entered at."""
    total = sum(totals.values())
    ranked = sorted(rates.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))[:n]
    keys: list[dict[str, Any]] = []
    load = dict.fromkeys(ring.nodes, 0.0)
    for (keyspace, key), by_node in ranked:
        rate = sum(by_node.values())
        share = rate / total if total else 0.0
        replicas = list(ring.preference_list(key_token(keyspace, key), replication.get(keyspace, 3)))
        for replica in replicas:
            load[replica] = load.get(replica, 0.0) + share
        keys.append(
            {
                "keyspace": keyspace,
                "key": key,
                "rate": round(rate, 2),
                "share": round(share, 4),
                "replicas": replicas,
                "nodes": {x: round(r / rate, 4) for x, r in sorted(by_node.items()) if rate},
            }
        )
    return {
        "cmd": "hot",
        "ok": True,
        "total_rate": round(total, 2),
        "window_s": TAU,
        "keys": keys,
        # Share of all client requests that entered at each node.
        "nodes": {x: round(r / total, 4) if total else 0.0 for x, r in sorted(totals.items())},
        # Share of all requests each node serves as a replica of the keys listed (every replica of
        # a key takes part in its writes and most of its reads): what a hot key does to load.
        "replica_load": {x: round(v, 4) for x, v in sorted(load.items())},
    }
