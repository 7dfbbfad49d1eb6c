"""Exact dots: the dots a node mints for a key it does not hold, one dense sequence per key.

A node that is not a home replica of a key mints the dot of two kinds of write to it: a put it
forwards to a replica (the request carries the dot, and every coordinator that takes it applies it
under that one dot: a put handed to a second coordinator after the first did not answer in time is
one write, not two siblings), and a write it coordinates itself as a fallback. Such a node holds no
record of the key to count from, and the replicas may receive its dots in any order, so these dots
are *exact*: a context names the ones it saw (core/model/versions.py), never claiming one it did not.

Their counters are dense per key: 1, 2, 3 for each (exact actor, key). The node keeps the last one
in its store (meta `xdot/{keyspace}/{key}` = [actor, counter, life]) and writes it durably before
the dot leaves the node, so no counter is ever minted twice. Dense counters let a context fold the
dots it has seen into one entry per actor, provided every minted dot reaches the key's replicas
sooner or later; so every one of them does, as the write or as a *void*:

- a write taken by a coordinator, which says so by echoing the dot, is stored;
- a forwarded put that no coordinator took (every one refused it, saying nothing was stored) is
  stored as a void (a tombstone of the same dot, content type `VOID`, which wins over a copy of the
  put should one ever arrive), left as a hint for a home replica;
- a forwarded put whose coordinators went silent (it may have been applied) is left as a hint of
  the put itself: an unknown outcome may take effect later, so the hint delivers it.

Until then the key's record shows `life` (the node's boot count) as in flight. A node that crashed
with a dot of the key in flight cannot know whether it reached anyone, so the next time it mints for
that key it starts a new exact actor for it (`A~x7`, numbered from the node's epoch sequence): the
old actor's gap is then the only one it can leave, and contexts stop growing all the same.
"""

from __future__ import annotations

from bhandar_cli.core.model import (
    MAX_INTEGER,
    BadInput,
    Dot,
    Store,
    VersionVector,
    cloud_dot,
    exact_actor,
    is_exact,
)
from bhandar_cli.core.roles.dot_lease import DotLease

META = "xdot/"
BOOTS = "boots"
EPOCH = "epoch"  # the node's sequence of fresh actor numbers (fallback actors before, A~x7 now)


def next_epoch(store: Store) -> int:
    """A number never handed out before by this node (durable with the next sync)."""
    epoch = int(store.get_meta(EPOCH) or 0) + 1
    store.put_meta(EPOCH, epoch)
    return epoch


class ExactDots:
    """This node's dense per-key counters of exact dots, and which of them are still in flight."""

    def __init__(self, store: Store, lease: DotLease) -> None:
        self._store = store
        self._lease = lease  # the home actor names the exact actor (a restore renames both)
        self.life = int(store.get_meta(BOOTS) or 0) + 1
        store.put_meta(BOOTS, self.life)
        self._in_flight: dict[tuple[str, str], int] = {}

    def mint(self, keyspace: str, key: str, context: VersionVector) -> Dot:
        """The next exact dot of `key` (written to the store: send it only after the next sync).

        A context claiming a dot of this node's current actor for the key beyond the last one
        minted is forged (or made up): only this node can prove that, so it refuses it here."""
        name = f"{META}{keyspace}/{key}"
        saved = self._store.get_meta(name)
        base = exact_actor(self._lease.actor)
        actor, counter = base, 0
        if saved and is_exact(str(saved[0])) and str(saved[0]).startswith(base):
            actor, counter = str(saved[0]), int(saved[1])
            left_by = int(saved[2])
            if left_by and left_by != self.life:
                # A dot of this key was in flight when an earlier life ended: a gap may stay.
                actor, counter = exact_actor(self._lease.actor, next_epoch(self._store)), 0
        claimed = _claimed(context, actor)
        if claimed > counter:
            raise BadInput(
                f"context from the future: it claims {actor}:{claimed} for {keyspace}/{key}, but "
                f"{actor} has minted at most {actor}:{counter} (use the context a get returned)"
            )
        if counter >= MAX_INTEGER:
            actor, counter = exact_actor(self._lease.actor, next_epoch(self._store)), 0
        counter += 1
        self._store.put_meta(name, [actor, counter, self.life])
        self._in_flight[(keyspace, key)] = self._in_flight.get((keyspace, key), 0) + 1
        return actor, counter

    def settle(self, keyspace: str, key: str) -> None:
        """A dot minted for `key` is stored somewhere durable (or left as a hint here)."""
        left = self._in_flight.get((keyspace, key), 0) - 1
        if left > 0:
            self._in_flight[(keyspace, key)] = left
            return
        self._in_flight.pop((keyspace, key), None)
        name = f"{META}{keyspace}/{key}"
        saved = self._store.get_meta(name)
        if saved and int(saved[2]) == self.life:
            self._store.put_meta(name, [saved[0], saved[1], 0])

    def mine(self, dot: Dot) -> bool:
        """Whether `dot` is one this node minted (one of its exact actors)."""
        return dot[0].startswith(exact_actor(self._lease.actor)) and is_exact(dot[0])

    @property
    def in_flight(self) -> int:
        """Keys with a dot not yet known stored."""
        return len(self._in_flight)


def _claimed(context: VersionVector, actor: str) -> int:
    """The highest dot of `actor` that `context` says was seen."""
    top = context.get(actor, 0)
    for entry, counter in context.items():
        dot = cloud_dot(entry)
        if dot is not None and dot[0] == actor and counter > top:
            top = counter
    return top
