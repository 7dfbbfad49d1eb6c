"""A table the MANIFEST lists, removed while its node was down: the node says so and serves no
resurrected data.

The table removed holds the only tombstone of a key (written, deleted, each flushed into a table of
its own), so the node's own copy after the restart is the older value again. The node must count
it with the corruptions, show it in `info` (what `status` shows), log it once, repair the key from
the other replicas, and, until that repair ends, answer no read from its own copy.
"""

from __future__ import annotations

import logging

import pytest

from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.store import Store
from bhandar_cli.core.model.versions import context_of
from bhandar_cli.core.protocol.client_messages import Failure, GetRequest, GetResult, PutRequest
from bhandar_cli.core.protocol.messages import KeyspaceRequest
from bhandar_cli.sim.sim_cluster import SimCluster
from bhandar_cli.storage.disk.sim_disk import SimDisk
from bhandar_cli.storage.engine_options import EngineOptions
from bhandar_cli.store.record_store import RecordStore

VICTIM = "A"


def _cluster(disks: dict[str, SimDisk]) -> SimCluster:
    def open_store(name: str) -> RecordStore:
        disk = disks.setdefault(name, SimDisk())
        disk.makedirs("/n")
        return RecordStore(disk, "/n", EngineOptions(memtable_bytes=1 << 20))

    def reopen(_name: str, store: Store) -> Store:
        assert isinstance(store, RecordStore)
        store.reopen()
        return store

    return SimCluster(seed=7, nodes=3, store_factory=open_store, reopen_store=reopen)


def _cluster_with_keyspace(disks: dict[str, SimDisk]) -> tuple[SimCluster, RecordStore]:
    """Three nodes on simulated disks with keyspace ks (N=3), and the victim's store."""
    c = _cluster(disks)
    assert not isinstance(c.call(VICTIM, KeyspaceRequest(c.new_rid(), KeyspaceDef("ks", n=3))), Failure)
    c.run_for(1.0)
    store = c.hosts[VICTIM].store
    assert isinstance(store, RecordStore)
    return c, store


def _put(c: SimCluster, key: str, value: bytes | None) -> None:
    """Write over (or delete) what the key holds, at ALL."""
    got = _read(c, VICTIM, key, "ALL")
    assert isinstance(got, GetResult), got
    held = got.record
    context = context_of(held.siblings) if isinstance(held, Versioned) else None
    done = c.call(VICTIM, PutRequest(c.new_rid(), "ks", key, value, "application/json", context, "ALL"))
    assert not isinstance(done, Failure), done


def _read(c: SimCluster, via: str, key: str, level: str) -> GetResult | Failure:
    got = c.call(via, GetRequest(c.new_rid(), "ks", key, level))
    assert isinstance(got, GetResult | Failure), got
    return got


def _live(record: object) -> list[bytes]:
    assert record is None or isinstance(record, Versioned), record
    return [] if record is None else [s.value for s in record.siblings if s.value is not None]


def test_a_removed_table_holding_a_tombstone_is_loud_and_resurrects_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    disks: dict[str, SimDisk] = {}
    c, store = _cluster_with_keyspace(disks)
    _put(c, "gone", b'"old"')
    _put(c, "kept", b'"v1"')
    store.flush()
    _put(c, "gone", None)  # the tombstone ...
    _put(c, "kept", b'"v2"')  # ... and the update, in a table of their own
    tombstones = store.flush()
    assert tombstones is not None and _live(store.get("ks", "gone")) == []

    c.kill(VICTIM)
    disks[VICTIM].remove(f"/n/{tombstones}")
    with caplog.at_level(logging.ERROR):
        c.revive(VICTIM)
        c.run_for(0.001)  # the first step after the restart: the store's open is reported
        # Until the repair ends the node answers no read from its own copy: not even at ONE, where
        # it would otherwise answer alone.
        for level in ("ONE", "QUORUM"):
            for via in ("A", "B"):
                got = _read(c, via, "gone", level)
                assert isinstance(got, GetResult) and _live(got.record) == [], (level, via, got)
                got = _read(c, via, "kept", level)
                assert isinstance(got, GetResult) and _live(got.record) == [b'"v2"'], (level, via, got)
        node = c.hosts[VICTIM].node
        assert node is not None
        info = node.info(c.now, counts=False)
        said = [line for line in info["conditions"] if tombstones in line]
        assert len(said) == 1 and "missing" in said[0], info.get("conditions")
        assert node.metrics.corruptions.get("sstable_missing") == 1, node.metrics.corruptions
        c.run_for(30.0)  # the repair from B and C
    logged = [r for r in caplog.records if tombstones in r.getMessage()]
    assert len(logged) == 1 and "missing" in logged[0].getMessage(), [r.getMessage() for r in logged]
    assert _live(store.get("ks", "gone")) == []  # the tombstone is back in A's own copy
    assert _live(store.get("ks", "kept")) == [b'"v2"']
    assert node.info(c.now, counts=False).get("damaged", []) == []
    got = _read(c, VICTIM, "gone", "ONE")  # served from its own copy again, and right
    assert isinstance(got, GetResult) and _live(got.record) == []


def test_a_restart_before_the_repair_ends_still_answers_no_read_from_the_damaged_copy() -> None:
    """The second open finds no damage (the first dropped the table from the MANIFEST): the mark
    the node kept on disk is what keeps its copy out of reads until the repair ends."""
    disks: dict[str, SimDisk] = {}
    c, store = _cluster_with_keyspace(disks)
    _put(c, "gone", b'"old"')
    store.flush()
    _put(c, "gone", None)
    tombstones = store.flush()
    assert tombstones is not None
    c.kill(VICTIM)
    disks[VICTIM].remove(f"/n/{tombstones}")
    c.revive(VICTIM)
    c.run_for(0.001)  # the damage is found and marked; the repair has only begun
    assert "ks" in store.get_meta("unrepaired")
    c.kill(VICTIM)
    c.revive(VICTIM)
    assert store.engine.take_corruptions() == []  # nothing to find this time
    assert _live(store.get("ks", "gone")) == [b'"old"']  # its own copy is still the resurrected one
    got = _read(c, VICTIM, "gone", "ONE")
    assert isinstance(got, GetResult) and _live(got.record) == [], got
    c.run_for(30.0)
    assert _live(store.get("ks", "gone")) == []
    assert store.get_meta("unrepaired") == []
    node = c.hosts[VICTIM].node
    assert node is not None and "unrepaired" not in node.info(c.now, counts=False)


def test_a_lost_table_of_dot_counters_makes_the_node_write_as_a_new_actor() -> None:
    """The table removed held the node's last dot-counter marks: counting on from the older mark
    left in another table would hand out the same dot again for another value. The node writes as
    a new actor instead, and nothing it acknowledged is shadowed by a reused dot."""
    disks: dict[str, SimDisk] = {}
    c, store = _cluster_with_keyspace(disks)
    _put(c, "a", b'"1"')
    store.flush()
    for i in range(5):
        _put(c, f"b{i}", b'"2"')  # dots A:2.. and the lease's marks, in a table of their own
    last = store.flush()
    assert last is not None
    dots_before = {s.dot for i in range(5) for s in store.get("ks", f"b{i}").siblings}  # type: ignore[union-attr]
    c.kill(VICTIM)
    disks[VICTIM].remove(f"/n/{last}")
    c.revive(VICTIM)
    c.run_for(0.001)
    done = c.call(VICTIM, PutRequest(c.new_rid(), "ks", "c", b'"3"', "application/json", None, "QUORUM"))
    assert not isinstance(done, Failure), done
    (sibling,) = store.get("ks", "c").siblings  # type: ignore[union-attr]
    assert sibling.dot[0].startswith(f"{VICTIM}~d") and sibling.dot not in dots_before, sibling.dot
    assert store.get_meta("actor") == sibling.dot[0]
