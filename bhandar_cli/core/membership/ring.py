"""The consistent-hash ring: virtual-node tokens, owners, preference lists and moved keys.

Each node places V tokens at `hash32("{node}:{i}")` (the seed's scheme). A key belongs to the first
token clockwise from its hash. The preference list walks clockwise from there, skipping nodes
already chosen and preferring zones not yet used, so N replicas sit in N zones when zones allow.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache

from bhandar_cli.core.model import hash32

RING_SIZE = 1 << 32


def node_tokens(node: str, vnodes: int) -> list[int]:
    """The seed's token positions for one node."""
    return [hash32(f"{node}:{i}") for i in range(vnodes)]


@lru_cache(maxsize=1 << 16)
def key_token(keyspace: str, key: str) -> int:
    """The ring position of a key inside a keyspace.

    Cached: routing, hinting and every Merkle tree build hash the same keys again and again, and
    the hash is a byte-at-a-time loop in Python. The bound keeps a store of millions of keys from
    keeping a token per key in memory."""
    return hash32(f"{keyspace}/{key}")


@dataclass(frozen=True)
class TokenRange:
    """The half-open arc (lo, hi] of the ring owned by the token at `hi` (it wraps when lo >= hi)."""

    lo: int
    hi: int
    owner: str

    def contains(self, token: int) -> bool:
        if self.lo < self.hi:
            return self.lo < token <= self.hi
        return token > self.lo or token <= self.hi

    @property
    def size(self) -> int:
        return (self.hi - self.lo) % RING_SIZE or RING_SIZE


class Ring:
    """An immutable ring over a set of nodes, each with its tokens and zone."""

    def __init__(self, tokens: Mapping[str, Iterable[int]], zones: Mapping[str, str] | None = None):
        pairs = [(pos, node) for node, toks in tokens.items() for pos in toks]
        # A stable sort on the position only, as the seed's `sort((a, b) => a[0] - b[0])`.
        pairs.sort(key=lambda p: p[0])
        self.positions: list[int] = [p for p, _ in pairs]
        self.owners: list[str] = [n for _, n in pairs]
        self.nodes: tuple[str, ...] = tuple(tokens)
        self.zones: dict[str, str] = {n: (zones or {}).get(n, n) for n in self.nodes}
        self._walks: dict[int, tuple[str, ...]] = {}
        self._prefs: dict[tuple[int, int], tuple[str, ...]] = {}

    @classmethod
    def build(cls, nodes: Iterable[str], vnodes: int, zones: Mapping[str, str] | None = None) -> Ring:
        return cls({n: node_tokens(n, vnodes) for n in nodes}, zones)

    def __len__(self) -> int:
        return len(self.positions)

    def index_of(self, token: int) -> int:
        """Index of the first token clockwise from `token` (binary search, wrapping at the end)."""
        if not self.positions:
            raise ValueError("the ring has no tokens")
        i = bisect_left(self.positions, token)
        return i % len(self.positions)

    def owner(self, token: int) -> str:
        return self.owners[self.index_of(token)]

    def walk(self, token: int) -> tuple[str, ...]:
        """Every distinct node in clockwise order from the key's owner."""
        start = self.index_of(token)
        cached = self._walks.get(start)
        if cached is None:
            cached = self._walks[start] = tuple(self._distinct_from(start))
        return cached

    def _distinct_from(self, start: int) -> Iterator[str]:
        """The distinct nodes clockwise from index `start`, lazily: a preference list needs only
        the first few, and a whole walk of a 240-node ring is thousands of steps."""
        seen: set[str] = set()
        owners, count, total = self.owners, len(self.positions), len(self.nodes)
        for j in range(count):
            node = owners[(start + j) % count]
            if node not in seen:
                seen.add(node)
                yield node
                if len(seen) == total:
                    return

    def preference_list(self, token: int, n: int) -> tuple[str, ...]:
        """N distinct nodes for the key, preferring zones not yet used (fewer if the ring is small)."""
        start = self.index_of(token)
        cached = self._prefs.get((start, n))
        if cached is None:
            cached = self._prefs[(start, n)] = self._zone_aware(start, n)
        return cached

    @cached_property
    def _zone_count(self) -> int:
        return len(set(self.zones.values()))

    def _zone_aware(self, start: int, n: int) -> tuple[str, ...]:
        """The first nodes of the walk in zones not used yet; when zones run out, the skipped nodes
        in clockwise order. The walk is taken only as far as needed (the same list as a whole one)."""
        chosen: list[str] = []
        used_zones: set[str] = set()
        walked: list[str] = []
        walk = self._distinct_from(start)
        zones = self._zone_count
        for node in walk:
            walked.append(node)
            if self.zones[node] not in used_zones:
                chosen.append(node)
                used_zones.add(self.zones[node])
            if len(chosen) == n or len(used_zones) == zones:
                break
        # Fewer zones than replicas: fill with the skipped nodes, still in clockwise order.
        for node in itertools.chain(walked, walk):
            if len(chosen) == n:
                break
            if node not in chosen:
                chosen.append(node)
        return tuple(chosen)

    def fallbacks(self, token: int, n: int) -> tuple[str, ...]:
        """The nodes after the preference list on the walk: where hints go when a replica is down."""
        prefs = self.preference_list(token, n)
        return tuple(node for node in self.walk(token) if node not in prefs)

    def ranges(self) -> list[TokenRange]:
        """Every token's arc, in ring order; the first range wraps around from the last token."""
        count = len(self.positions)
        return [TokenRange(self.positions[i - 1], self.positions[i], self.owners[i]) for i in range(count)]

    @cached_property
    def ownership(self) -> dict[str, float]:
        """Share of the ring each node owns as primary (sums to 1)."""
        share = dict.fromkeys(self.nodes, 0.0)
        if len(self.positions) == 1:
            share[self.owners[0]] = 1.0
            return share
        for rng in self.ranges():
            share[rng.owner] += rng.size / RING_SIZE
        return share

    def tokens_by_node(self) -> dict[str, list[int]]:
        toks: dict[str, list[int]] = {n: [] for n in self.nodes}
        for pos, node in zip(self.positions, self.owners, strict=True):
            toks[node].append(pos)
        return toks

    def with_node(self, node: str, tokens: Iterable[int], zone: str) -> Ring:
        toks = self.tokens_by_node()
        toks[node] = list(tokens)
        return Ring(toks, {**self.zones, node: zone})

    def without_node(self, node: str) -> Ring:
        toks = self.tokens_by_node()
        del toks[node]
        return Ring(toks, {n: z for n, z in self.zones.items() if n != node})


def moved_keys(before: Ring, after: Ring, tokens: Iterable[int]) -> int:
    """How many of the key tokens change primary owner between two rings."""
    return sum(1 for t in tokens if before.owner(t) != after.owner(t))
