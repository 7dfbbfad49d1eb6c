"""Which (range, peer) background anti-entropy compares next, and when.

Every repair interval the next comparison of the round starts, one at a time: an idle cluster
pays for one root-hash exchange per interval. Once a comparison of the round found a difference,
the rest of the round runs back to back: a node that missed writes is caught up in one round,
not one range per interval. (A peer that comes back up is not compared first on purpose: a
replica that missed writes stays stale until a read or the round reaches it, which is what the
demos show.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from bhandar_cli.core.model import KeyspaceDef, NodeConfig

Comparison = tuple[KeyspaceDef, int, int, str]  # (keyspace, lo, hi, peer)
ReplicatedRange = tuple[KeyspaceDef, int, int, tuple[str, ...]]  # (keyspace, lo, hi, other replicas)


class PeerStates(Protocol):
    """What the schedule asks of membership (ringview.RingView): whether a peer is up."""

    def is_up(self, peer: str, now: float) -> bool: ...


class RepairSchedule:
    """The background round: its queue, its pace and what hurries it."""

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
        self._queue: list[Comparison] = []  # next last
        self._differed = False  # a comparison of the current round found a difference
        self._next_round = first_round

    def next_deadline(self) -> float:
        """When the next comparison is due (inf when background repair is off)."""
        return self._next_round if self.config.repair_interval > 0 else math.inf

    def due(self, now: float) -> bool:
        """Is a comparison due now? (Advances the pace: call once per check.)"""
        if self.config.repair_interval <= 0 or now < self._next_round:
            return False
        self._next_round = now + self.config.repair_interval
        if not self._queue:
            self._differed = False
            ranges = self.replicated_ranges()
            self._queue = [(ks, lo, hi, peer) for ks, lo, hi, peers in ranges for peer in peers]
            self._queue.reverse()
        return True

    def next(self, now: float) -> Comparison | None:
        """The next comparison of the round with a peer that is up."""
        while self._queue:
            comparison = self._queue.pop()
            if self.ring_view.is_up(comparison[3], now):
                return comparison
        return None

    def ended(self, differed: bool) -> bool:
        """A background comparison ended: start the next one now rather than at the next interval?"""
        self._differed |= differed
        return self._differed and self.config.repair_interval > 0
