"""The node's Store on the LSM engine: layout, merge on read and compaction, durability, and the
records of other formats (the first, unversioned one; one newer than this build)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from random import Random

import cbor2
import pytest

from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.model.crdt import PNCounter
from bhandar_cli.core.model.record_digest import digest
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.core.protocol.client_messages import Failure, GetRequest, GetResult, PutRequest
from bhandar_cli.core.protocol.messages import KeyspaceRequest, RepairRequest
from bhandar_cli.sim.sim_cluster import SimCluster
from bhandar_cli.storage.disk.sim_disk import SimDisk
from bhandar_cli.storage.engine_options import EngineOptions
from bhandar_cli.store.record_format import FORMAT_VERSION, RECORD_TAG
from bhandar_cli.store.record_store import HINT, RecordStore, data_key
from tests.support.record_samples import FORMAT1_DATA, FORMAT1_DIGESTS, FORMAT1_HINT, LWW, SAMPLES, SIBLINGS


def sib(actor: str, n: int, value: bytes | None, ctx: dict[str, int] | None = None) -> Sibling:
    return Sibling((actor, n), ctx or {}, value)


def store(disk: SimDisk | None = None) -> tuple[RecordStore, SimDisk]:
    disk = disk or SimDisk()
    disk.makedirs("/n")
    return RecordStore(disk, "/n", EngineOptions(memtable_bytes=2048)), disk


def test_round_trip_of_records_hints_and_meta() -> None:
    s, _ = store()
    s.put_meta("keyspaces", [["ks", "siblings", 3, "sloppy"], ["c", "counter", 3, "sloppy"]])
    s.put("ks", "b", Versioned((sib("A", 1, b"1"),)))
    s.put("ks", "a", Versioned((sib("A", 2, None),)))
    s.put("c", "x", PNCounter({}).increment("A", 5, "r1"))
    s.put_hint(("C", "ks", "b"), Versioned((sib("A", 1, b"1"),)), 7.5)
    assert [k for k, _ in s.items("ks")] == ["a", "b"]
    assert s.keyspaces() == ["c", "ks"] and s.count() == 3
    counter = s.get("c", "x")
    assert isinstance(counter, PNCounter) and counter.value == 5
    assert [(h, c) for h, _, c in s.hints()] == [(("C", "ks", "b"), 7.5)]
    s.remove_hint(("C", "ks", "b"))
    assert list(s.hints()) == []
    s.remove("ks", "a")
    assert s.get("ks", "a") is None


def test_engine_merge_keeps_concurrent_siblings_across_flushes_and_compaction() -> None:
    s, _ = store()
    s.put_meta("keyspaces", [["ks", "siblings", 3, "sloppy"]])
    s.put("ks", "k", Versioned((sib("A", 1, b"a"),)))
    s.flush()
    # A blind write of an older-looking record: the engine's merge must not let it hide A:1.
    s.put("ks", "k", Versioned((sib("B", 1, b"b"),)))
    s.flush()
    got = s.get("ks", "k")
    assert isinstance(got, Versioned) and [x.dot for x in got.siblings] == [("A", 1), ("B", 1)]
    s.compact()
    assert s.get("ks", "k") == got
    # A write whose context covers both replaces them, through the same merge.
    s.put("ks", "k", Versioned((sib("C", 1, b"c", {"A": 1, "B": 1}),)))
    s.compact()
    after = s.get("ks", "k")
    assert isinstance(after, Versioned) and [x.dot for x in after.siblings] == [("C", 1)]


def test_lww_policy_is_kept_beside_the_record() -> None:
    s, _ = store()
    s.put_meta("keyspaces", [["p", "lww", 3, "sloppy"]])
    s.put("p", "k", Versioned((Sibling(("A", 1), {}, b"old", ts=1.0),)))
    s.flush()
    s.put("p", "k", Versioned((Sibling(("B", 1), {}, b"new", ts=2.0),)))
    got = s.get("p", "k")
    assert isinstance(got, Versioned) and [x.value for x in got.siblings] == [b"new"]


def test_jobs_and_deferred_syncs_pass_through_and_the_memory_store_has_none() -> None:
    s, disk = store()
    s.put_meta("keyspaces", [["ks", "siblings", 3, "sloppy"]])
    assert s.background_job() is None
    i = 0
    while s.stats().sealed_memtables == 0:
        s.put("ks", f"k{i}", Versioned((sib("A", i + 1, b"x" * 50),)))
        i += 1
    job = s.background_job()
    assert job is not None and job.kind == "flush"
    job.run()
    assert job.finish().installed and s.stats().sstables == 1
    fsync = s.begin_sync()
    assert fsync is not None
    fsync()
    disk.crash(torn=False)
    again, _ = store(disk)
    assert again.count() == i
    memory = MemoryStore()
    assert memory.background_job() is None and memory.begin_sync() is None


def test_synced_writes_survive_a_crash_with_a_torn_tail() -> None:
    for seed in range(20):
        rng = Random(seed)
        s, disk = store()
        acked: dict[str, bytes] = {}
        for i in range(rng.randint(5, 60)):
            value = f"v{i}".encode()
            s.put("ks", f"k{i % 7}", Versioned((sib("A", i + 1, value, {"A": i}),)))
            if rng.random() < 0.3:
                s.sync()
                acked = {f"k{j % 7}": f"v{j}".encode() for j in range(i + 1)}
        disk.crash(rng, torn=True)
        again, _ = store(disk)
        for key, value in acked.items():
            record = again.get("ks", key)
            assert isinstance(record, Versioned), (seed, key)
            # The acknowledged version, or a later one of the same key (written before the crash).
            got = record.siblings[-1].value
            assert got is not None and int(got[1:]) >= int(value[1:]), (seed, key)


def test_data_dir_survives_sigkill_of_the_whole_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cmd = [sys.executable, "-m", "bhandar_cli", "repl", "--data-dir", str(data), "-o", "json", "--nodes", "3"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    acked: list[str] = []
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("keyspace create ks\n")  # the keyspace definition must survive too
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["created"] is True
        for i in range(30):
            proc.stdin.write(f"put ks key{i} value{i}\n")
            proc.stdin.flush()
            reply = json.loads(proc.stdout.readline())
            if reply["ok"]:
                acked.append(f"key{i}")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert len(acked) == 30
    lines = "; ".join(f"get ks {k} c=ALL" for k in acked)
    out = subprocess.run([*cmd, "-e", lines], capture_output=True, text=True, timeout=60, check=True)
    replies = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["values"] for r in replies] == [[f"value{k[3:]}"] for k in acked]


def test_bench_storage_command_reports_both_sides_and_ratios(tmp_path: Path) -> None:
    cmd = [sys.executable, "-P", "-m", "bhandar_cli", "bench", "storage", "--ops", "2000", "-o", "json"]
    out = subprocess.run([*cmd, "--dir", str(tmp_path / "b")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["engine"]["puts_per_s"] > 0 and r["sqlite"]["puts_per_s"] > 0
    assert abs(r["put_ratio"] - r["engine"]["puts_per_s"] / r["sqlite"]["puts_per_s"]) < 1e-9
    assert r["get_ratio"] > 0


# --- other formats ---------------------------------------------------------------------------------


def _check_format1_samples(s: RecordStore, stage: str) -> None:
    for policy, record in SAMPLES.items():
        got = s.get(policy, "k")
        assert got == record, stage
        assert got is not None and digest(got).hex() == FORMAT1_DIGESTS[policy], stage
        assert list(s.items(policy)) == [("k", record)], stage
    assert list(s.hints()) == [(("C", "lww", "k"), LWW, 7.5)], stage


def test_values_the_first_format_wrote_are_read_through_the_engine_and_merged_into_the_current_one() -> None:
    s, disk = store()
    s.put_meta("keyspaces", [[policy, policy, 3, "sloppy"] for policy in SAMPLES])
    for policy, raw in FORMAT1_DATA.items():  # bytes exactly as the previous build stored them
        s.engine.put(data_key(policy, "k"), raw)
    s.engine.put(HINT + cbor2.dumps(["C", "lww", "k"]), FORMAT1_HINT)
    s.sync()
    _check_format1_samples(s, "in the memtable")
    s = RecordStore(disk, "/n", EngineOptions(memtable_bytes=2048))
    _check_format1_samples(s, "recovered from the WAL")
    s.flush()
    _check_format1_samples(s, "in an SSTable")
    # The engine's merge reads the old value and writes the merge in the current format.
    s.put("siblings", "k", Versioned((sib("N", 1, b"new"),)))
    s.flush()
    s.compact()
    merged = s.get("siblings", "k")
    assert isinstance(merged, Versioned)
    assert [x.dot for x in merged.siblings] == sorted([x.dot for x in SIBLINGS.siblings] + [("N", 1)])
    stored = s.engine.get(data_key("siblings", "k"))
    assert stored is not None
    assert cbor2.loads(stored)[:3] == [cbor2.CBORTag(RECORD_TAG, FORMAT_VERSION), "data", "siblings"]
    assert s.get("counter", "k") == SAMPLES["counter"] and s.get("lww", "k") == SAMPLES["lww"]


def _future(kind: str, *body: object) -> bytes:
    return cbor2.dumps([cbor2.CBORTag(RECORD_TAG, FORMAT_VERSION + 1), kind, *body])


def test_a_record_of_a_newer_format_is_reported_treated_as_absent_and_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s, disk = store()
    s.put_meta("keyspaces", [["ks", "siblings", 3, "sloppy"]])
    s.put("ks", "a", Versioned((sib("A", 1, b"a"),)))
    future = _future("data", "siblings", "a layout this build does not know")
    s.engine.put(data_key("ks", "b"), future)
    s.engine.put(HINT + cbor2.dumps(["C", "ks", "b"]), _future("hint", "?"))
    with caplog.at_level("WARNING", logger="bhandar_cli.store.record_store"):
        assert s.get("ks", "b") is None
        assert [k for k, _ in s.items("ks")] == ["a"]  # the other keys are served
        assert list(s.hints()) == []
        assert s.get("ks", "b") is None
    errors = list(s.unreadable.values())
    assert [e.version for e in errors] == [FORMAT_VERSION + 1] * 2
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings  # once per record, however often it is read
    assert all(f"record format version {FORMAT_VERSION + 1}" in w for w in warnings)
    assert s.count() == 2 and list(s.keys("ks")) == ["a", "b"]  # still there
    # A write to the key is kept beside it, through flushes, compaction and a restart.
    s.put("ks", "b", Versioned((sib("B", 1, b"b"),)))
    s.flush()
    s.compact()
    s.put("ks", "a", Versioned((sib("A", 2, b"a2", {"A": 1}),)))
    s.sync()
    s = RecordStore(disk, "/n", EngineOptions(memtable_bytes=2048))
    raw = s.engine.get(data_key("ks", "b"))
    assert raw is not None
    held = cbor2.loads(raw)
    assert (
        held[:2] == [cbor2.CBORTag(RECORD_TAG, FORMAT_VERSION), "held"]
        and future in held[2]
        and len(held[2]) == 2
    )
    assert s.get("ks", "b") is None
    a = s.get("ks", "a")
    assert isinstance(a, Versioned) and [x.value for x in a.siblings] == [b"a2"]


def test_a_node_keeps_serving_and_repairing_beside_a_record_it_cannot_read() -> None:
    disks: dict[str, SimDisk] = {}

    def open_store(name: str) -> RecordStore:
        disk = disks.setdefault(name, SimDisk())
        disk.makedirs("/n")
        return RecordStore(disk, "/n", EngineOptions(memtable_bytes=2048))

    c = SimCluster(seed=3, nodes=3, store_factory=open_store)
    assert not isinstance(c.call("A", KeyspaceRequest(c.new_rid(), KeyspaceDef("ks", n=3))), Failure)
    c.run_for(1.0)
    for key in ("good", "odd"):
        put = c.call("A", PutRequest(c.new_rid(), "ks", key, key.encode(), "application/json", None, "ALL"))
        assert not isinstance(put, Failure), put
    future = _future("data", "siblings", "?")
    store_a = c.hosts["A"].store
    assert isinstance(store_a, RecordStore)
    store_a.engine.put(data_key("ks", "odd"), future)  # as if a newer build had rewritten it
    repaired = c.call("A", RepairRequest(c.new_rid(), "ks"))
    assert not isinstance(repaired, Failure), repaired
    c.run_for(10.0)  # ticks: anti-entropy rounds, hint delivery
    assert c.is_alive("A")
    for key in ("good", "odd"):  # A holds nothing readable for "odd"; the other replicas answer
        got = c.call("A", GetRequest(c.new_rid(), "ks", key, "QUORUM"))
        assert isinstance(got, GetResult) and got.record is not None, (key, got)
        assert [s.value for s in got.record.siblings] == [key.encode()]  # type: ignore[union-attr]
    raw = store_a.engine.get(data_key("ks", "odd"))
    assert raw is not None and future in cbor2.loads(raw)[2]  # repaired beside, not over, it


def test_a_corruption_names_the_keys_and_the_time_as_a_person_reads_them() -> None:
    from random import Random

    from bhandar_cli.core.membership.ring import Ring
    from bhandar_cli.core.model.config import NodeConfig
    from bhandar_cli.core.model.store import MemoryStore, StoreDamage
    from bhandar_cli.core.node import Node
    from bhandar_cli.storage.damage import Corruption, KeyInterval
    from bhandar_cli.store.record_store import data_key, key_name

    lost = KeyInterval(data_key("kv", "k187"), data_key("kv", "k2"))
    found = Corruption("sstable_block", "/d/000004.sst", 4096, 512, "the block fails its check", lost)
    said = found.describe(key_name)
    assert "keys after kv/k187 through kv/k2" in said, said
    assert "\\x00" not in said and "b'" not in said
    assert key_name(b"mgeneration") == "metadata generation"

    # A node of its own (no keyspace, so nothing to repair) says where and when it found damage.
    node = Node("A", Ring.build(["A"], 8), MemoryStore(), Random(0), 0.0, NodeConfig(repair_interval=0))
    block = StoreDamage(
        kind="sstable_block", file="/d/000004.sst", offset=4096, message=said, keyspaces=("kv",)
    )
    torn = StoreDamage(kind="wal_record", file="/d/000005.log", offset=0, message="torn", keyspaces=("kv",))
    node.storage_damaged(1796451666.3, [block])
    node.storage_damaged(12.5, [torn])
    first, second = node.info(12.5, counts=False)["conditions"]
    assert first.startswith("storage corruption found at 2026-12-05 06:21:06 UTC: "), first
    assert second.startswith("storage corruption found at 12.5 s of virtual time: "), second
