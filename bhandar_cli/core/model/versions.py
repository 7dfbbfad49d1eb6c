"""Dotted version vectors: siblings, causal contexts, merge, LWW and the limits on both.

Every write gets a *dot* (actor, counter) from its coordinator and carries the *context* (a version
vector) the client read before writing. A sibling is obsolete exactly when another sibling's context
covers its dot. Two writes with the same context through the same coordinator get different dots,
so both survive as siblings (a bare vector-clock increment would silently drop one: Riak's lesson).

Merging is "union by dot, then drop what some other sibling's context covers". That is commutative,
associative and idempotent because coverage is judged against the whole union.

A coordinator's counter for a key is above anything it has seen for itself in that key's record
(dots and contexts alike), so a forged or stale context can never make it reuse a dot, and above
every counter it issued for any key (its counter lease, core/roles/dot_lease.py, durable before a dot above
its saved mark leaves the node), so a crash or a pruned context cannot make it forget one.
Replicas always receive the coordinator's whole merged record, never a lone sibling, so a record
that knows dot (A, n) also holds or covers every earlier A-dot of that key.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter

Dot = tuple[str, int]
VersionVector = Mapping[str, int]

JSON = "application/json"
BYTES = "application/octet-stream"

MAX_VV_ENTRIES = 10
SIBLING_WARN = 25
SIBLING_MAX = 100


@dataclass(frozen=True, slots=True)
class Sibling:
    """One concurrent version of a key. `value is None` marks a tombstone (a delete)."""

    dot: Dot
    context: VersionVector
    value: bytes | None
    ctype: str = JSON
    ts: float = 0.0

    @property
    def tombstone(self) -> bool:
        return self.value is None

    @property
    def clock(self) -> dict[str, int]:
        """The version vector of this sibling: its context plus its own dot."""
        clock = dict(self.context)
        actor, counter = self.dot
        if clock.get(actor, 0) < counter:
            clock[actor] = counter
        return clock


def covers(context: VersionVector, dot: Dot) -> bool:
    return context.get(dot[0], 0) >= dot[1]


def merge_siblings(a: Iterable[Sibling], b: Iterable[Sibling]) -> tuple[Sibling, ...]:
    """Union by dot, then drop every sibling whose dot another sibling's context covers."""
    by_dot: dict[Dot, Sibling] = {s.dot: s for s in a}
    for s in b:
        if s.dot not in by_dot:
            by_dot[s.dot] = s
    if len(by_dot) == 1:
        return tuple(by_dot.values())
    # Some context covers (actor, n) exactly when the join of all contexts does: one pass to build
    # the join, then one lookup per sibling (this is the hottest loop of the store).
    top: dict[str, int] = {}
    for s in by_dot.values():
        for actor, counter in s.context.items():
            if top.get(actor, 0) < counter:
                top[actor] = counter
    kept = [s for dot, s in by_dot.items() if top.get(dot[0], 0) < dot[1]]
    kept.sort(key=_dot_order)
    return tuple(kept)


_dot_order = attrgetter("dot")


def lww_merge(a: Iterable[Sibling], b: Iterable[Sibling]) -> tuple[Sibling, ...]:
    """Last writer wins: one sibling, the greatest by (timestamp, actor, counter).

    Between two copies of the same write (same dot), the tombstone wins: in a keyspace with a ttl
    a replica turns an expired value into a tombstone of the same dot (core/roles/expiry.py), and a
    copy that has not expired it yet must never bring the value back."""
    best: Sibling | None = None
    for s in (*a, *b):
        if (
            best is None
            or (s.ts, s.dot) > (best.ts, best.dot)
            or (s.dot == best.dot and s.value is None and best.value is not None)
        ):
            best = s
    return () if best is None else (best,)


def join(vectors: Iterable[VersionVector]) -> dict[str, int]:
    """Entry-wise maximum."""
    out: dict[str, int] = {}
    for vv in vectors:
        for actor, counter in vv.items():
            if out.get(actor, 0) < counter:
                out[actor] = counter
    return out


def context_of(siblings: Iterable[Sibling]) -> dict[str, int]:
    """The causal context handed to a client: the join of every sibling's clock (tombstones too)."""
    return join(s.clock for s in siblings)


def next_dot(siblings: Iterable[Sibling], actor: str, context: VersionVector) -> Dot:
    """A fresh dot for `actor`, above every counter of `actor` in the record and the context."""
    top = context.get(actor, 0)
    for s in siblings:
        if s.dot[0] == actor and s.dot[1] > top:
            top = s.dot[1]
        seen = s.context.get(actor, 0)
        if seen > top:
            top = seen
    return (actor, top + 1)


def prune(
    context: VersionVector, keep: str, limit: int = MAX_VV_ENTRIES, prefer: Collection[str] = ()
) -> dict[str, int]:
    """Bound a context to `limit` entries: `keep`, then the actors in `prefer`, then the largest
    counters.

    Dropping an entry only ever makes a write cover *less*, so pruning can add siblings but can
    never make the store discard a write (Dynamo prunes the oldest entries the same way). The
    coordinator prefers the actors of the siblings the write replaces: otherwise a context holding
    ten forged huge counters would keep only those, and no write could replace anything again.
    """
    if len(context) <= limit:
        return dict(context)
    ordered = sorted(context.items(), key=lambda kv: (kv[0] != keep, kv[0] not in prefer, -kv[1], kv[0]))
    return dict(ordered[:limit])


def descends(a: VersionVector, b: VersionVector) -> bool:
    """a >= b entry-wise: a has seen everything b has."""
    return all(a.get(actor, 0) >= counter for actor, counter in b.items())


def relation(a: VersionVector, b: VersionVector) -> str:
    """'equal', 'descends' (a after b), 'precedes' (a before b) or 'concurrent'."""
    ab, ba = descends(a, b), descends(b, a)
    if ab and ba:
        return "equal"
    if ab:
        return "descends"
    if ba:
        return "precedes"
    return "concurrent"


def live_values(siblings: Iterable[Sibling]) -> list[Sibling]:
    return [s for s in siblings if s.value is not None]


def show_clock(vv: VersionVector) -> str:
    """`{A:2, B:1}`, as the seed prints clocks."""
    return "{" + ", ".join(f"{k}:{vv[k]}" for k in sorted(vv)) + "}"
