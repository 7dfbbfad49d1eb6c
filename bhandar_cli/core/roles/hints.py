"""Hinted handoff: writes a fallback node holds for a home replica that was down.

A hint is the merged record for (target, keyspace, key); a second write to the same key for the
same target merges into it, so the queue holds one entry per key. Queues are bounded in count per
target (a full queue refuses, so the write is not acknowledged on the strength of a hint that was
never stored) and in age: an expired hint stops waiting for its target and is handed to another
home replica of its key that is up (see handoff.py), which anti-entropy then repairs the target
from. It is never just dropped: under a sloppy quorum a hint may be the only copy of an
acknowledged write (found by `bhandar chaos --seed 56 --ops 3000 --faults all`, where hints
expired after 3.7 s while both home replicas of a write acknowledged at ONE were down).
Every change goes through the store, so hints survive a restart of their holder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bhandar_cli.core.model import HintKey, Record, Store, merge_records, same_record


@dataclass(frozen=True, slots=True)
class HintSummary:
    target: str
    count: int
    oldest_s: float


class HintQueue:
    """Per-target queues of hinted records, persisted in the node's store."""

    def __init__(
        self,
        store: Store,
        policy_of: Callable[[str], str],
        max_per_target: int = 10_000,
        max_age: float = 3 * 3600.0,
    ) -> None:
        self._store = store
        self._policy_of = policy_of
        self.max_per_target = max_per_target
        self.max_age = max_age
        self._queues: dict[str, dict[tuple[str, str], tuple[Record, float]]] = {}
        self._by_key: dict[tuple[str, str], set[str]] = {}
        self._expired: set[HintKey] = set()  # counted as expired already (this life)
        for (target, keyspace, key), record, created in store.hints():
            self._insert(target, keyspace, key, record, created)

    def _insert(self, target: str, keyspace: str, key: str, record: Record, created: float) -> None:
        self._queues.setdefault(target, {})[(keyspace, key)] = (record, created)
        self._by_key.setdefault((keyspace, key), set()).add(target)

    def has_room(self, target: str, keyspace: str, key: str) -> bool:
        """Whether `add` would take a hint of this key for `target`."""
        queue = self._queues.get(target, {})
        return (keyspace, key) in queue or len(queue) < self.max_per_target

    def add(self, now: float, target: str, keyspace: str, key: str, record: Record) -> bool:
        """Store (merging) a hint; False when the target's queue is full."""
        if not self.has_room(target, keyspace, key):
            return False
        existing = self._queues.get(target, {}).get((keyspace, key))
        merged: Record | None = record
        created = now
        if existing is not None:
            merged = merge_records(self._policy_of(keyspace), existing[0], record)
            created = existing[1]
        assert merged is not None  # merging a record into anything gives a record
        self._insert(target, keyspace, key, merged, created)
        self._store.put_hint((target, keyspace, key), merged, created)
        return True

    def remove(self, target: str, keyspace: str, key: str, delivered: Record | None = None) -> bool:
        """Drop a hint; with `delivered`, only if it has not changed since that copy was sent."""
        queue = self._queues.get(target)
        if not queue or (keyspace, key) not in queue:
            return False
        if delivered is not None and not same_record(queue[(keyspace, key)][0], delivered):
            return False
        del queue[(keyspace, key)]
        if not queue:
            del self._queues[target]
        holders = self._by_key.get((keyspace, key))
        if holders is not None:
            holders.discard(target)
            if not holders:
                del self._by_key[(keyspace, key)]
        self._store.remove_hint((target, keyspace, key))
        self._expired.discard((target, keyspace, key))
        return True

    def keys(self) -> list[HintKey]:
        """Every (target, keyspace, key) held."""
        return [(t, ks, key) for t, queue in self._queues.items() for ks, key in queue]

    def targets(self) -> list[str]:
        return sorted(self._queues)

    def pending(self, target: str | None = None) -> int:
        if target is not None:
            return len(self._queues.get(target, {}))
        return sum(len(q) for q in self._queues.values())

    def batch(self, target: str, limit: int) -> list[tuple[str, str, Record]]:
        """Up to `limit` hints for `target`, oldest first."""
        queue = self._queues.get(target, {})
        oldest = sorted(queue.items(), key=lambda item: item[1][1])[:limit]
        return [(ks, key, record) for (ks, key), (record, _) in oldest]

    def record_for(self, keyspace: str, key: str) -> Record | None:
        """The merge of every hint this node holds for the key (a fallback answers reads with it)."""
        merged: Record | None = None
        for target in self._by_key.get((keyspace, key), ()):
            record = self._queues[target][(keyspace, key)][0]
            merged = merge_records(self._policy_of(keyspace), merged, record)
        return merged

    def expire(self, now: float) -> int:
        """Mark hints older than max_age expired (`overdue` hands them to another replica);
        returns how many expired since the last call."""
        fresh = 0
        for target, queue in self._queues.items():
            for (ks, key), (_, created) in queue.items():
                if now - created > self.max_age and (target, ks, key) not in self._expired:
                    self._expired.add((target, ks, key))
                    fresh += 1
        return fresh

    def overdue(self, target: str, now: float, limit: int) -> list[tuple[str, str, Record]]:
        """Up to `limit` of `target`'s hints older than max_age, oldest first."""
        queue = self._queues.get(target, {})
        old = sorted(
            (item for item in queue.items() if now - item[1][1] > self.max_age), key=lambda i: i[1][1]
        )
        return [(ks, key, record) for (ks, key), (record, _) in old[:limit]]

    def summary(self, now: float) -> list[HintSummary]:
        return [
            HintSummary(target, len(queue), max(now - created for _, created in queue.values()))
            for target, queue in sorted(self._queues.items())
        ]
