"""The sibling limit where replicas merge: reported, never enforced by dropping a sibling.

A coordinator refuses a write that would take a key past `sibling_max` (core/roles/write_path.py).
Merges cannot refuse: read repair, anti-entropy, hints and streams bring together siblings that
different replicas each acknowledged within the limit, and dropping any of them would lose an
acknowledged write. So a merge keeps every sibling and this records the keys it left over the limit:
a count in the metrics, a bounded list in the node's status, and the warning a `get` of the key
carries.
"""

from __future__ import annotations

from typing import Any

from bhandar_cli.core.model.metrics import NodeMetrics
from bhandar_cli.core.model.records import Record, Versioned

LISTED = 20  # keys named in the status view, at most
TRACKED = 10_000  # keys remembered as over the limit, at most (the oldest are forgotten first)


def live_siblings(record: Record | None) -> int:
    """Siblings that hold a value (tombstones do not count toward the limit)."""
    if not isinstance(record, Versioned):
        return 0
    return sum(1 for s in record.siblings if s.value is not None)


def over_limit_warning(key: str, live: int, limit: int) -> str:
    return (
        f"{key} has {live} siblings, over the limit of {limit}: replicas merged writes each had "
        "acknowledged, and none is dropped; read it, merge the siblings and write back with the context"
    )


class SiblingLimit:
    """The keys of this node that merges left over the sibling limit (its own copies, not hints)."""

    def __init__(self, limit: int, metrics: NodeMetrics) -> None:
        self.limit = limit
        self.metrics = metrics
        self._over: dict[tuple[str, str], int] = {}  # (keyspace, key) -> live siblings

    def stored(self, keyspace: str, key: str, record: Record) -> None:
        """A merge stored `record` as this node's copy of the key."""
        if not isinstance(record, Versioned) or len(record.siblings) <= self.limit:
            if self._over:
                self._over.pop((keyspace, key), None)
            return
        live = live_siblings(record)
        slot = (keyspace, key)
        if live <= self.limit:
            self._over.pop(slot, None)
            return
        if slot not in self._over:
            self.metrics.sibling_limit_exceeded += 1
            if len(self._over) >= TRACKED:
                del self._over[next(iter(self._over))]
        self._over[slot] = live

    def view(self) -> dict[str, Any]:
        """For `status`: how many keys are over the limit, and the first few of them."""
        listed = [
            {"keyspace": ks, "key": key, "siblings": live}
            for (ks, key), live in list(self._over.items())[:LISTED]
        ]
        return {"limit": self.limit, "count": len(self._over), "keys": listed}
