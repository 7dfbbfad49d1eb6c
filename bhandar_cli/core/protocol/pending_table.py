"""What a node waits on (core/protocol/pending.py), by id, with their timeouts; and the source of
those ids."""

from __future__ import annotations

import heapq
import math

from bhandar_cli.core.protocol.pending import Pending


class IdSource:
    """Ids of everything a node waits on: pendings, repair sessions and batches, stream sessions.

    Ids travel in replies. Each life of a node starts them at a random point, so a late reply to a
    request of a previous life (before a crash) is never taken for the answer to a new one: that
    mixed up records of two keys. Found by `bhandar chaos --seed 189 --ops 2000 --faults all`.
    """

    __slots__ = ("_next",)

    def __init__(self, first: int) -> None:
        self._next = first

    def take(self) -> int:
        taken = self._next
        self._next += 1
        return taken


class PendingTable:
    """Pendings by id. A pending leaves when its role is done with it, or when `expired` hands it
    back at its deadline."""

    def __init__(self, ids: IdSource) -> None:
        self._ids = ids
        self._pending: dict[int, Pending] = {}
        self._timers: list[tuple[float, int]] = []  # (deadline, op id), a heap

    def add(self, op: Pending) -> int:
        op_id = self._ids.take()
        self._pending[op_id] = op
        heapq.heappush(self._timers, (op.deadline, op_id))
        return op_id

    def get(self, op_id: int) -> Pending | None:
        return self._pending.get(op_id)

    def discard(self, op_id: int) -> None:
        self._pending.pop(op_id, None)

    def __len__(self) -> int:
        return len(self._pending)

    def expired(self, now: float) -> list[tuple[int, Pending]]:
        """Remove and return the pendings whose deadline has passed, earliest first."""
        out: list[tuple[int, Pending]] = []
        timers, ops = self._timers, self._pending
        while timers and timers[0][0] <= now:
            _, op_id = heapq.heappop(timers)
            op = ops.pop(op_id, None)
            if op is not None:  # still waiting: not finished before its deadline
                out.append((op_id, op))
        return out

    def next_deadline(self) -> float:
        """The earliest deadline of an op still waiting (inf when none)."""
        timers = self._timers
        # Most requests finish long before their deadline; drop their timers here so the driver
        # does not wake the node for nothing (one wasted tick per request, otherwise).
        while timers and timers[0][1] not in self._pending:
            heapq.heappop(timers)
        return timers[0][0] if timers else math.inf
