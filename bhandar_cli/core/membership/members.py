"""Cluster membership as one node sees it: who exists, where, in which zone, with which tokens.

Each member's state is versioned by (generation, heartbeat): a restart bumps the generation, and
the member itself bumps its heartbeat every gossip round and whenever its status changes, so the
newer state always wins a merge. The rings follow from the table: the *current* ring holds normal
and leaving members (they own data now); the *future* ring holds normal and joining members (who
will own it once the movement finishes). Where they differ, writes go to both (pending ranges).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace

from bhandar_cli.core.membership.ring import Ring

STATUSES = ("joining", "normal", "leaving", "left")
CODES = {"joining": "J", "normal": "N", "leaving": "L", "left": "X"}
SHARED_RINGS = 64  # rings kept for reuse: a few versions of a cluster's membership at a time

RingKey = tuple[tuple[str, tuple[int, ...], str], ...]
_shared: OrderedDict[RingKey, Ring] = OrderedDict()


def shared_ring(members: RingKey) -> Ring:
    """The ring of (id, tokens, zone) members, one object for every table that agrees on them.

    A ring caches its walks and preference lists; every node of a simulated cluster derives the
    same ring from its own table, so sharing the object means a 240-node cluster computes each
    preference list once rather than 240 times. Rings are immutable (their caches are derived), so
    sharing changes nothing a node sees."""
    ring = _shared.get(members)
    if ring is None:
        ring = Ring({m: tokens for m, tokens, _ in members}, {m: zone for m, _, zone in members})
        _shared[members] = ring
        if len(_shared) > SHARED_RINGS:
            _shared.popitem(last=False)
    else:
        _shared.move_to_end(members)
    return ring


@dataclass(frozen=True, slots=True)
class MemberState:
    id: str
    zone: str
    tokens: tuple[int, ...]
    status: str = "normal"
    generation: int = 0
    heartbeat: int = 0
    address: str = ""  # host:port of the node's peer port ("" in process-less clusters)
    http: str = ""  # host:port of its HTTP API
    # Protocol 5, in a cluster with a CA: the member's certificate (DER) and its signature over
    # the fields above (core/membership/authorship.py), so a node hearing the state second-hand
    # knows the member said it.
    cert: bytes = b""
    seal: bytes = b""

    @property
    def version(self) -> tuple[int, int]:
        return (self.generation, self.heartbeat)

    def bump(self, **changes: object) -> MemberState:
        return replace(self, heartbeat=self.heartbeat + 1, seal=b"", **changes)  # type: ignore[arg-type]


class Membership:
    """A node's membership table and the rings derived from it (cached per version)."""

    def __init__(self, me: MemberState, known: Iterable[MemberState] = ()) -> None:
        self.me = me.id
        self.members: dict[str, MemberState] = {m.id: m for m in known}
        self.members[me.id] = me
        self.version = 0  # bumped whenever ownership (status or tokens) changes
        self.regenerated = False  # set when peers knew a later generation of this node (persist it)
        # Members an issuer removed (`cluster remove`): left for good, whatever they say after.
        self.removed: set[str] = set()
        self._rings: dict[str, Ring] = {}
        # Derived from members' ids and statuses only, so they change with `version`; gossip asks
        # for them at every merge.
        self._peers: tuple[str, ...] | None = None
        self._moving: bool | None = None

    @property
    def mine(self) -> MemberState:
        return self.members[self.me]

    def update_mine(self, **changes: object) -> MemberState:
        new = self.mine.bump(**changes)
        self._set(new)
        return new

    def merge(self, incoming: MemberState) -> tuple[bool, MemberState | None]:
        """Take `incoming` if newer. Returns (taken, previous state)."""
        if incoming.id == self.me:
            # Never accept others' idea of ourselves. But peers that knew a later life of this node
            # (it was restarted on an older copy of its data) would take every state of this life
            # for old news and call it down forever: start a generation above theirs. Only this
            # node issues its states, so one newer than its own is from a previous life, also with
            # the same generation and a higher heartbeat (the copy was one restart behind).
            if incoming.version > self.mine.version:
                self._set(replace(self.mine, generation=incoming.generation + 1, heartbeat=0, seal=b""))
                self.regenerated = True
            return False, None
        old = self.members.get(incoming.id)
        if incoming.id in self.removed or (old is not None and incoming.version <= old.version):
            return False, old
        self._set(incoming)
        return True, old

    def remove(self, node: str) -> bool:
        """An issuer removed `node`: it is left from now on and no state of it is taken again.
        True if that changed anything."""
        if node == self.me or node in self.removed:
            return False
        self.removed.add(node)
        old = self.members.get(node)
        if old is not None and old.status != "left":
            self._set(replace(old, status="left"))
        return True

    def _set(self, state: MemberState) -> None:
        old = self.members.get(state.id)
        self.members[state.id] = state
        if old is None or old.status != state.status or old.tokens != state.tokens or old.zone != state.zone:
            self.version += 1
            self._rings.clear()
            self._peers = self._moving = None

    def ring(self, which: str = "current") -> Ring:
        """'current': normal + leaving members; 'future': normal + joining."""
        cached = self._rings.get(which)
        if cached is None:
            owners = ("normal", "leaving") if which == "current" else ("normal", "joining")
            chosen = [m for m in self.members.values() if m.status in owners and m.tokens]
            chosen.sort(key=lambda m: m.id)
            cached = self._rings[which] = shared_ring(tuple((m.id, m.tokens, m.zone) for m in chosen))
        return cached

    def moving(self) -> bool:
        """Is any member joining or leaving (so pending ranges exist)?"""
        if self._moving is None:
            self._moving = any(m.status in ("joining", "leaving") for m in self.members.values())
        return self._moving

    def peers(self) -> list[str]:
        if self._peers is None:
            peers = (m for m, s in self.members.items() if m != self.me and s.status != "left")
            self._peers = tuple(sorted(peers))
        return list(self._peers)

    def address_of(self, node: str) -> str:
        """The node's peer address ("host:port") as gossip carries it; "" if unknown."""
        state = self.members.get(node)
        return "" if state is None else state.address

    def status_of(self, node: str) -> str:
        if node in self.removed:  # even one this node never heard of: it is out for good
            return "left"
        state = self.members.get(node)
        return state.status if state is not None else "unknown"
