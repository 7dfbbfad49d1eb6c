"""Keyspaces with a time to live, under the simulator's clock: a value is invisible from the moment
it expires, becomes the same tombstone on every replica without coordination, never comes back
through anti-entropy or read repair, and is reaped (and, on disk, compacted away)."""

from __future__ import annotations

import pytest

from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.config import KeyspaceDef, NodeConfig, parse_ttl, show_ttl
from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.model.records import Versioned, merge_records
from bhandar_cli.core.model.versions import JSON, Sibling
from bhandar_cli.core.protocol.client_messages import GetRequest, GetResult, PutRequest, PutResult
from bhandar_cli.core.roles.expiry import expire
from bhandar_cli.core.wire import from_wire, to_wire
from bhandar_cli.sim.sim_cluster import SimCluster
from tests.support.keyspace_setup import create_keyspace
from tests.support.sim_calls import put

TTL = 60
CACHE = KeyspaceDef("cache", "lww", 3, "sloppy", TTL)


def found(c: SimCluster, via: str, key: str, level: str = "ALL") -> list[bytes]:
    result = c.call(via, GetRequest(c.new_rid(), CACHE.name, key, level))
    assert isinstance(result, GetResult), result
    record = result.record
    assert record is None or isinstance(record, Versioned)
    return [] if record is None else [s.value for s in record.siblings if s.value is not None]


def written_at(c: SimCluster, node: str, key: str) -> float:
    record = c.hosts[node].store.get(CACHE.name, key)
    assert isinstance(record, Versioned)
    return record.siblings[0].ts


def held(c: SimCluster, node: str, key: str) -> str:
    """What a replica stores for the key: value, tombstone or nothing."""
    record = c.hosts[node].store.get(CACHE.name, key)
    if record is None:
        return "nothing"
    assert isinstance(record, Versioned)
    return "tombstone" if all(s.value is None for s in record.siblings) else "value"


def test_ttl_is_parsed_shown_and_allowed_only_with_lww() -> None:
    assert [parse_ttl(t) for t in ("60s", "5m", "2h", "1d", "90", "0")] == [60, 300, 7200, 86400, 90, 0]
    assert [show_ttl(s) for s in (60, 300, 90, 86400, 0)] == ["1m", "5m", "90s", "1d", "0"]
    for bad in ("", "1.5s", "-3s", "10w", "s"):
        with pytest.raises(BadInput, match="bad ttl"):
            parse_ttl(bad)
    with pytest.raises(BadInput, match="ttl needs policy=lww"):
        KeyspaceDef("c", "siblings", 3, "sloppy", 60)
    with pytest.raises(BadInput, match="out of range"):
        KeyspaceDef("c", "lww", 3, "sloppy", -1)


def test_a_definition_without_ttl_travels_as_before_and_one_with_it_keeps_it() -> None:
    plain = to_wire(KeyspaceDef("kv"))
    assert "ttl" not in plain  # an older peer would refuse a field it does not know
    assert from_wire(plain) == KeyspaceDef("kv")
    assert from_wire(to_wire(CACHE)) == CACHE


def test_expiry_is_decided_by_the_write_timestamp_alone() -> None:
    value = Versioned((Sibling(("A", 1), {}, b"1", JSON, 100.0),))
    assert expire(CACHE, value, 100.0 + TTL - 0.001) is value
    gone = expire(CACHE, value, 100.0 + TTL)
    assert isinstance(gone, Versioned) and gone.siblings[0].value is None
    assert gone.siblings[0].dot == ("A", 1) and gone.siblings[0].ts == 100.0  # same write, now a tombstone
    assert expire(KeyspaceDef("kv", "lww"), value, 1e9) is value  # no ttl: never
    # A replica that has not expired it yet loses to one that has, whichever merges first.
    assert merge_records("lww", value, gone) == gone and merge_records("lww", gone, value) == gone


def test_an_expired_value_is_invisible_at_once_on_every_coordinator() -> None:
    c = SimCluster(seed=11, nodes=3, zones=3)
    create_keyspace(c, CACHE)
    put(c, "A", "session", b'"s1"', "ALL", CACHE.name)
    ts = written_at(c, "A", "session")
    c.run_for(ts + TTL - 0.01 - c.now)
    assert found(c, "B", "session", "ONE") == [b'"s1"']
    c.run_for(ts + TTL - c.now)  # exactly the expiry time: no sweep needed to hide it
    for node in "ABC":
        assert found(c, node, "session", "ONE") == []
        assert found(c, node, "session", "ALL") == []
    # A write after expiry is a new value with its own ttl.
    put(c, "C", "session", b'"s2"', "ALL", CACHE.name)
    assert found(c, "A", "session") == [b'"s2"']


@pytest.mark.parametrize("fault", ["partition", "kill"])
def test_an_expired_value_never_comes_back_after_a_partition_heals_and_is_reaped(fault: str) -> None:
    config = NodeConfig(tombstone_grace=30.0)
    c = SimCluster(seed=12, nodes=3, zones=3, config=config)
    create_keyspace(c, CACHE)
    put(c, "A", "k", b'"v"', "ALL", CACHE.name)
    ts = written_at(c, "A", "k")
    # C is cut off (or down, so it does not sweep) while the value expires on A and B.
    if fault == "partition":
        c.model.partition([["A", "B"], ["C"]], c.ring.nodes)
    else:
        c.kill("C")
    c.run_for(ts + TTL + 5.0 - c.now)
    assert held(c, "A", "k") == held(c, "B", "k") == "tombstone"
    assert held(c, "C", "k") == ("tombstone" if fault == "partition" else "value")
    assert c.metrics().values_expired >= 2
    if fault == "partition":
        c.net.heal()
    else:
        c.revive("C")
    c.run_for(c.config.detection_bound())
    assert found(c, "C", "k") == [] and found(c, "A", "k", "ONE") == []

    # Anti-entropy and the reaper: every replica drops it once the grace has passed and every
    # replica was seen holding the tombstone (a round of comparisons with each peer, seconds).
    # The grace runs from the tombstone's timestamp, which is the write's (expiry.py), so with a
    # ttl longer than the grace that can be as soon as the rounds confirmed it: what must hold
    # until then is that no replica holds the value again.
    def reaped() -> bool:
        return [held(c, n, "k") for n in "ABC"] == ["nothing"] * 3

    def no_value() -> bool:
        return all(held(c, n, "k") in ("tombstone", "nothing") for n in "ABC")

    assert c.loop.run_until_true(lambda: reaped() or not no_value(), c.now + 300.0)
    assert reaped()
    assert found(c, "B", "k") == []
    c.run_for(10.0)  # more anti-entropy rounds: nothing brings it back
    assert [held(c, n, "k") for n in "ABC"] == ["nothing"] * 3


def test_unexpired_values_are_left_alone_by_the_sweep() -> None:
    c = SimCluster(seed=13, nodes=3, zones=3)
    create_keyspace(c, CACHE)
    plain = create_keyspace(c, KeyspaceDef("plain", "lww", 3))
    for i in range(20):
        put(c, "A", f"k{i}", b"1", "ALL", CACHE.name)
        result = c.call("A", PutRequest(c.new_rid(), plain.name, f"k{i}", b"1", JSON, None, "ALL"))
        assert isinstance(result, PutResult)
    c.run_for(TTL / 2)
    assert c.metrics().values_expired == 0
    assert all(held(c, n, f"k{i}") == "value" for n in "ABC" for i in range(20))
    c.run_for(TTL)
    assert c.metrics().values_expired == 60  # 20 keys on 3 replicas; the plain keyspace untouched
    assert all(c.hosts[n].store.get("plain", f"k{i}") is not None for n in "ABC" for i in range(20))
    assert key_token(CACHE.name, "k0") != key_token(plain.name, "k0")


def test_on_disk_an_expired_value_becomes_a_tombstone_and_compaction_drops_it_once_reaped() -> None:
    from bhandar_cli.storage.disk.sim_disk import SimDisk
    from bhandar_cli.storage.engine_options import EngineOptions
    from bhandar_cli.store.record_store import RecordStore

    disk = SimDisk()
    disk.makedirs("/n")
    store = RecordStore(disk, "/n", EngineOptions(memtable_bytes=2048))
    store.put_meta("keyspaces", [["cache", "lww", 3, "sloppy", TTL]])
    marker = b'"expiring-value-marker"'
    value = Versioned((Sibling(("A", 1), {}, marker, JSON, 5.0),))
    store.put("cache", "k", value)
    store.flush()
    # The sweep's rewrite goes through the engine's merge with the value on disk: the tombstone wins.
    swept = expire(CACHE, value, 5.0 + TTL)
    assert swept is not None
    store.put("cache", "k", swept)
    got = store.get("cache", "k")
    assert isinstance(got, Versioned) and got.siblings[0].value is None

    def on_disk() -> bool:
        files = [f"/n/{name}" for name in disk.listdir("/n")]
        return any(marker in disk.read(path) for path in files if disk.size(path))

    store.flush()
    assert on_disk()  # the value's table is still there
    store.compact()
    assert not on_disk()  # compaction merged the value away: only the tombstone is left
    store.remove("cache", "k")  # reaped (core/repair/reaping.py)
    store.flush()
    store.compact()
    assert store.get("cache", "k") is None and list(store.keys("cache")) == []


def test_a_read_reports_no_version_dropped_by_last_writer_wins_when_both_had_expired() -> None:
    # Neither read repair nor anti-entropy may bring C up to date: C must still hold v1 at the end.
    c = SimCluster(seed=14, nodes=3, zones=3, config=NodeConfig(read_repair=False, repair_interval=0))
    create_keyspace(c, CACHE)
    put(c, "A", "k", b'"v1"', "ALL", CACHE.name)
    c.kill("C")  # C keeps v1 and misses v2, a blind write that does not cover it
    c.run_for(c.config.detection_bound())
    put(c, "A", "k", b'"v2"', "QUORUM", CACHE.name)
    ts = written_at(c, "A", "k")
    c.revive("C")
    c.run_for(c.config.detection_bound())
    fresh = c.call("B", GetRequest(c.new_rid(), CACHE.name, "k", "ALL"))
    assert isinstance(fresh, GetResult) and [s.dot for s in fresh.dropped], fresh  # v1, unseen by v2
    c.run_for(ts + TTL - c.now)
    gone = c.call("B", GetRequest(c.new_rid(), CACHE.name, "k", "ALL"))
    assert isinstance(gone, GetResult) and gone.dropped == () and found(c, "A", "k") == []
