"""Safe tombstone reaping: a tombstone goes only once every other replica of its range holds it.

A completed anti-entropy session confirms, for every tombstone this node held when it began, that
the peer now holds it too (or something newer). A tombstone is removed only after the grace period
*and* once every other replica of its range is confirmed to hold it, so no replica can still hold
the value it deleted. Replicas reap one by one; a tombstone reaped here is remembered so that
repair does not bring it back from a replica that has not reaped it yet.
"""

from __future__ import annotations

from bhandar_cli.core.membership import RingView
from bhandar_cli.core.model import KeyspaceDef, NodeConfig, NodeMetrics, Record, Store, Versioned, digest


def is_tombstone(record: Record) -> bool:
    return (
        isinstance(record, Versioned)
        and bool(record.siblings)
        and all(s.value is None for s in record.siblings)
    )


class TombstoneReaper:
    """Which peers hold each of this node's tombstones, and the tombstones it has removed."""

    def __init__(
        self, node_id: str, config: NodeConfig, store: Store, ring_view: RingView, metrics: NodeMetrics
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.store = store
        self.ring_view = ring_view
        self.metrics = metrics
        self._confirmed: dict[tuple[str, str], tuple[bytes, set[str]]] = {}  # -> (digest, peers holding it)
        self._reaped: dict[tuple[str, str], float] = {}  # tombstones removed here -> their newest timestamp

    def confirm(self, now: float, ks: KeyspaceDef, hi: int, peer: str, tombstones: dict[str, bytes]) -> None:
        """`peer` now holds `tombstones` (key -> digest) of the range ending at `hi`; remove those
        every other replica holds."""
        others = [p for p in self.ring_view.ring.preference_list(hi, ks.n) if p != self.node_id]
        for key, held in tombstones.items():
            record = self.store.get(ks.name, key)
            if record is None or digest(record) != held:
                self._confirmed.pop((ks.name, key), None)  # changed since: start over
                continue
            seen, peers = self._confirmed.get((ks.name, key), (held, set()))
            if seen != held:
                peers = set()
            peers.add(peer)
            self._confirmed[(ks.name, key)] = (held, peers)
            assert isinstance(record, Versioned)  # the digest is a tombstone's
            written = max(s.ts for s in record.siblings)
            if now - written > self.config.tombstone_grace and all(p in peers for p in others):
                self.store.remove(ks.name, key)
                del self._confirmed[(ks.name, key)]
                self._reaped[(ks.name, key)] = written
                self.metrics.tombstones_reaped += 1

    def already_reaped(self, keyspace: str, key: str, record: Record) -> bool:
        """Is `record` a tombstone no newer than one this node reaped? (Replicas reap one by one;
        without this, the last to reap would push its copy back to those that already had.)"""
        when = self._reaped.get((keyspace, key))
        if when is None or not isinstance(record, Versioned) or not is_tombstone(record):
            return False
        return max(s.ts for s in record.siblings) <= when
