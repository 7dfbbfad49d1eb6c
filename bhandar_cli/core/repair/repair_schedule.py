"""Which (range, peer) comparisons background anti-entropy starts next, and when.

A round visits each peer this node shares ranges with, one peer per repair interval: at its turn
every range shared with that peer is compared, at most MAX_IN_FLIGHT comparisons at once, the next
starting as one ends. Most end at the root (equal hashes: one probe and its reply), so an idle
node pays about two messages per range shared with one peer per interval, and a difference
anywhere is found within about (peers x interval), not (ranges x peers x interval) as when one
comparison started per interval. Once a comparison of the round found a difference, the next
peer's turn starts as soon as the current one's comparisons all ended: a node that missed writes
is caught up in one round. (A peer that comes back up is not compared first on purpose: a replica
that missed writes stays stale until a read or the round reaches it, which is what the demos
show.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from bhandar_cli.core.model import KeyspaceDef, NodeConfig

Comparison = tuple[KeyspaceDef, int, int, str]  # (keyspace, lo, hi, peer)
ReplicatedRange = tuple[KeyspaceDef, int, int, tuple[str, ...]]  # (keyspace, lo, hi, other replicas)

# Background comparisons in flight at once: each holds a range's Merkle walk and its tombstone
# digests, so a node with hundreds of ranges per peer does not hold them all at once.
MAX_IN_FLIGHT = 32


class PeerStates(Protocol):
    """What the schedule asks of membership (ringview.RingView): whether a peer is up."""

    def is_up(self, peer: str, now: float) -> bool: ...


class RepairSchedule:
    """The background round: its peers, the current peer's comparisons, its pace and what hurries it."""

    def __init__(
        self,
        config: NodeConfig,
        ring_view: PeerStates,
        replicated_ranges: Callable[[], list[ReplicatedRange]],
        first_round: float,
    ) -> None:
        self.config = config
        self.ring_view = ring_view
        self.replicated_ranges = replicated_ranges
        self._round: list[str] = []  # peers whose turn is still to come this round, next last
        self._turn: list[Comparison] = []  # the current peer's comparisons not started yet, next last
        self._differed = False  # a comparison of the current round found a difference
        self._next_turn = first_round

    def next_deadline(self) -> float:
        """When the next peer's turn is due (inf when background repair is off)."""
        return self._next_turn if self.config.repair_interval > 0 else math.inf

    def due(self, now: float) -> bool:
        """Is a peer's turn due now? (Advances the pace: call once per check.)"""
        if self.config.repair_interval <= 0 or now < self._next_turn:
            return False
        self._next_turn = now + self.config.repair_interval
        return True

    def start(self, now: float, in_flight: int) -> list[Comparison]:
        """A turn is due and no background comparison runs: the comparisons to start now, of the
        current peer's turn if some are left, else of the next peer's (a new round after the last)."""
        if not self._turn:
            self._turn = self._next_peer(now, new_round=True)
        return self._take(now, in_flight)

    def ended(self, differed: bool, now: float, in_flight: int) -> list[Comparison]:
        """A background comparison ended (`in_flight` others still run): the comparisons to start
        now. The rest of the current turn, bounded; and when the turn is over and the round found a
        difference, the next peer's turn at once rather than at the next interval."""
        self._differed |= differed
        if self.config.repair_interval <= 0:
            return []
        if not self._turn and not in_flight and self._differed:
            self._turn = self._next_peer(now, new_round=False)
        return self._take(now, in_flight)

    def _take(self, now: float, in_flight: int) -> list[Comparison]:
        out: list[Comparison] = []
        while self._turn and in_flight + len(out) < MAX_IN_FLIGHT:
            comparison = self._turn.pop()
            if self.ring_view.is_up(comparison[3], now):  # (down since its turn began: skipped)
                out.append(comparison)
        return out

    def _next_peer(self, now: float, new_round: bool) -> list[Comparison]:
        """The comparisons of the next peer of the round that is up and shares a range (next last);
        a new round starts, calm, when this one is over and `new_round` allows it."""
        ranges = self.replicated_ranges()  # once per turn: the peers skipped below share it
        if not self._round and new_round:
            self._differed = False
            peers = {peer: None for _, _, _, others in ranges for peer in others}
            self._round = list(reversed(peers))  # ring order: nodes do not all start with one peer
        while self._round:
            peer = self._round.pop()
            if not self.ring_view.is_up(peer, now):
                continue
            turn = [(ks, lo, hi, peer) for ks, lo, hi, others in ranges if peer in others]
            if turn:
                turn.reverse()
                return turn
        return []
