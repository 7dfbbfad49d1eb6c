"""Expiry of values in keyspaces with a time to live: invisible at once, then tombstones, then gone.

A value written at `ts` into a keyspace with `ttl` is expired at any `now >= ts + ttl`. Every
replica decides that alone, from the write's own timestamp carried in the record (never its local
arrival time), so all of them agree without talking:

- reads see nothing at once: the coordinator expires the merged record before answering
  (read_path.py), so a read at `ts + ttl` finds no value even on a replica that has not swept yet;
- a sweep (`ExpirySweeper`, from the node's housekeeping) rewrites each expired value as a
  tombstone of the *same* dot, context and timestamp. Replicas sweep independently and end up
  with byte-identical tombstones, so anti-entropy finds them equal; a replica still holding the
  value loses to the tombstone on merge (`versions.lww_merge`: same dot, tombstone wins), so
  neither anti-entropy nor read repair ever brings the value back. The tombstone also keeps the
  value's content type, which a delete's tombstone never has: that is how a read tells "expired"
  from "deleted" (client/outcomes.py `SiblingView.expired`);
- the tombstones are then reaped like those of deletes (core/repair/reaping.py: after the grace period, once
  every replica holds one), and compaction drops the removed records from disk.

Only `lww` keyspaces take a ttl (config.KeyspaceDef): a value there is one sibling with one
timestamp.
"""

from __future__ import annotations

from bhandar_cli.core.model import KeyspaceDef, Keyspaces, NodeMetrics, Record, Store, Versioned

SWEEP_INTERVAL = 1.0  # seconds between the starts of two sweeps of the ttl keyspaces
SWEEP_BATCH = 512  # records looked at per housekeeping tick, so a large keyspace never stalls a node


def expire(ks: KeyspaceDef | None, record: Record | None, now: float) -> Record | None:
    """`record` as it reads at `now`: each value of a ttl keyspace past its time a tombstone."""
    if ks is None or not ks.ttl or not isinstance(record, Versioned):
        return record
    ttl = ks.ttl
    if all(s.value is None or s.ts + ttl > now for s in record.siblings):
        return record
    return Versioned(
        tuple(s.tombstoned() if s.value is not None and s.ts + ttl <= now else s for s in record.siblings)
    )


class ExpirySweeper:
    """Turns the expired values this replica holds into tombstones, a batch at a time."""

    def __init__(self, store: Store, keyspaces: Keyspaces, metrics: NodeMetrics) -> None:
        self.store = store  # the indexed store: the hash index sees every rewrite
        self.keyspaces = keyspaces
        self.metrics = metrics
        self._pending: list[tuple[str, str]] = []
        self._next_sweep = 0.0

    def tick(self, now: float) -> None:
        if not self._pending:
            if now < self._next_sweep:
                return
            self._next_sweep = now + SWEEP_INTERVAL
            # A list of the keys, not an iterator over the store: rewriting a record while
            # iterating would change what is being iterated.
            self._pending = [
                (ks.name, key) for ks in self.keyspaces.all() if ks.ttl for key in self.store.keys(ks.name)
            ]
            self._pending.reverse()  # popped from the end: oldest-listed first
        for _ in range(min(SWEEP_BATCH, len(self._pending))):
            name, key = self._pending.pop()
            record = self.store.get(name, key)
            expired = expire(self.keyspaces.get(name), record, now)
            if expired is not record and expired is not None:
                self.store.put(name, key, expired)
                self.metrics.values_expired += 1
