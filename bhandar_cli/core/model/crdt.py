"""PN-Counter for `counter` keyspaces, with request-id de-duplication.

Each replica (actor) owns one entry: P (sum of its increments), N (sum of its decrements), a
sequence number, and the recent request ids it applied. Only the actor itself changes its entry
and every change raises `seq`, so merge keeps, per actor, the entry with the higher `seq`; for P
and N that is the entry-wise maximum of a classic PN-Counter.

A retried increment (same request id) arriving at a coordinator that already holds the id is not
applied again. If a retry reaches a coordinator that had not yet seen the first attempt, two actors
hold the id; `value` then counts it once (it subtracts the duplicates), so merging reveals and
corrects the double count. When an actor forgets an old id (it keeps the last `ID_WINDOW`), it first
folds any duplicate it knows of into its own N (or P) so the value does not jump; the actor that
sorts first among the holders keeps the increment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import itemgetter

ID_WINDOW = 1000
_first = itemgetter(0)


@dataclass(frozen=True, slots=True)
class ActorCount:
    """One actor's share of a counter."""

    p: int = 0
    n: int = 0
    seq: int = 0
    ids: tuple[tuple[str, int], ...] = ()  # (request id, delta), oldest first


@dataclass(frozen=True, slots=True)
class PNCounter:
    """A PN-Counter: actor -> ActorCount. Treat as immutable."""

    actors: Mapping[str, ActorCount]
    # `value`, once worked out (it reads every request id): the counter never changes, and an
    # increment's coordinator reads the value of the counter the previous increment made.
    _value: int | None = field(default=None, compare=False, repr=False)

    @property
    def value(self) -> int:
        if self._value is not None:
            return self._value
        entries = self.actors.values()
        total = sum(a.p - a.n for a in entries)
        if sum(1 for a in entries if a.ids) >= 2:
            # An increment held by several actors is counted once: subtract it for each extra
            # holder. (With one actor holding every id, no increment can be counted twice.)
            first: dict[str, int] = {}
            for entry in entries:
                for rid, delta in entry.ids:
                    if rid in first:
                        total -= first[rid]
                    else:
                        first[rid] = delta
        object.__setattr__(self, "_value", total)
        return total

    def has_applied(self, request_id: str) -> bool:
        # `in` over a map runs the comparison loop in C: this is on every increment's path.
        return any(request_id in map(_first, entry.ids) for entry in self.actors.values())

    def increment(self, actor: str, delta: int, request_id: str, window: int = ID_WINDOW) -> PNCounter:
        """Apply an increment as `actor`, unless this request id is already counted here."""
        if self.has_applied(request_id):
            return self
        mine = self.actors.get(actor, ActorCount())
        p, n = mine.p, mine.n
        if delta >= 0:
            p += delta
        else:
            n -= delta
        ids = (*mine.ids, (request_id, delta))
        excess = len(ids) - window
        if excess <= 0:  # the common case: nothing to forget
            # A new request id, held by no actor: the value moves by exactly `delta`.
            value = None if self._value is None else self._value + delta
            return PNCounter({**self.actors, actor: ActorCount(p=p, n=n, seq=mine.seq + 1, ids=ids)}, value)
        holders: dict[str, list[str]] = {}
        for other, entry in self.actors.items():
            if other != actor:
                for rid, _ in entry.ids:
                    holders.setdefault(rid, []).append(other)
        # An id another actor also holds, where this actor sorts first among the holders, is
        # pinned: this actor keeps the increment, so it must keep the id. Pinned ids do not count
        # against the window; if they did, enough of them would make this actor forget the id it
        # just applied, and a retry of that request would be counted again. Found by the property
        # test tests/core/model/test_crdt.py::test_window_pruning_keeps_the_value.
        pinned = {rid for rid, _ in ids if rid in holders and min(holders[rid]) > actor}
        excess = sum(1 for rid, _ in ids if rid not in pinned) - window
        kept: list[tuple[str, int]] = []
        for rid, old_delta in ids:
            if excess <= 0 or rid in pinned:
                kept.append((rid, old_delta))
                continue
            excess -= 1
            if rid in holders:
                # Another actor keeps this increment; undo our copy before forgetting the id.
                if old_delta >= 0:
                    n += old_delta
                else:
                    p -= old_delta
        new = ActorCount(p=p, n=n, seq=mine.seq + 1, ids=tuple(kept))
        return PNCounter({**self.actors, actor: new})

    def merge(self, other: PNCounter) -> PNCounter:
        if not other.actors:
            return self
        if not self.actors:
            return other
        out: dict[str, ActorCount] | None = None  # copied at the first entry `other` has newer
        for actor, entry in other.actors.items():
            mine = self.actors.get(actor)
            if mine is None or entry.seq > mine.seq:
                if out is None:
                    out = dict(self.actors)
                out[actor] = entry
        # One side often holds all the other has (a replica sent what it already stored, or a
        # write's record that extends the replica's): that side is the merge, as it is.
        if out is None:
            return self
        theirs = other.actors
        if len(out) == len(theirs) and all((t := theirs.get(a)) is e or t == e for a, e in out.items()):
            return other
        return PNCounter(out)

    def entries(self) -> dict[str, tuple[int, int]]:
        """actor -> (P, N), for display."""
        return {actor: (e.p, e.n) for actor, e in sorted(self.actors.items())}


EMPTY_COUNTER = PNCounter({})
