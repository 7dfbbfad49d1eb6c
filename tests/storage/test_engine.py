"""The engine against a dict model, recovery reports, snapshots, and the real disk."""

from __future__ import annotations

import os
import random
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from bhandar_cli.storage import wal
from bhandar_cli.storage.compaction import TierPolicy
from bhandar_cli.storage.disk.real_disk import RealDisk
from bhandar_cli.storage.disk.sim_disk import SimDisk, SimulatedCrash
from bhandar_cli.storage.engine import LSMEngine
from bhandar_cli.storage.engine_options import EngineOptions
from bhandar_cli.storage.record_kinds import encode_op
from bhandar_cli.storage.recovery import restore_snapshot
from bhandar_cli.storage.storage_errors import CorruptManifestError, EngineClosedError, EngineFailedError

from .conftest import SMALL, small_engine

KEYS = st.binary(min_size=0, max_size=6)
VALUES = st.binary(max_size=40)


class EngineVsDict(RuleBasedStateMachine):
    """Random puts, deletes, flushes, compactions, clean reopens and crash reopens after a sync."""

    keys = Bundle("keys")

    def __init__(self) -> None:
        super().__init__()
        self.disk = SimDisk()
        self.model: dict[bytes, bytes] = {}

    @initialize(small=st.sampled_from([0, 64, 100_000]), min_tables=st.sampled_from([2, 3]))
    def open_engine(self, small: int, min_tables: int) -> None:
        # small=0 and 64 let tables of different sizes fall in different tiers, so compactions
        # that leave older tables out (and must keep deletion markers) happen too.
        self.tiers = TierPolicy(min_tables=min_tables, small_table_bytes=small)
        self.engine = small_engine(self.disk, tiers=self.tiers)

    @rule(target=keys, key=KEYS)
    def new_key(self, key: bytes) -> bytes:
        return key

    @rule(key=keys, value=VALUES)
    def put(self, key: bytes, value: bytes) -> None:
        self.engine.put(key, value)
        self.model[key] = value

    @rule(batch=st.lists(KEYS, min_size=1, max_size=30), value=VALUES)
    def put_many_then_flush(self, batch: list[bytes], value: bytes) -> None:
        # Tables of very different sizes, so size tiers split and some compactions leave the
        # oldest table out (deletion markers must then survive them).
        for key in batch:
            self.engine.put(key, value)
            self.model[key] = value
        self.engine.flush()

    @rule(key=keys)
    def delete(self, key: bytes) -> None:
        self.engine.delete(key)
        self.model.pop(key, None)

    @rule(key=keys)
    def get(self, key: bytes) -> None:
        assert self.engine.get(key) == self.model.get(key)

    @rule(start=st.none() | KEYS, end=st.none() | KEYS)
    def scan(self, start: bytes | None, end: bytes | None) -> None:
        inside = [k for k in self.model if (start is None or k >= start) and (end is None or k < end)]
        want = sorted((k, self.model[k]) for k in inside)
        assert list(self.engine.scan(start, end)) == want
        assert list(self.engine.scan_keys(start, end)) == [k for k, _ in want]

    @rule()
    def flush(self) -> None:
        self.engine.flush()

    @rule(full=st.booleans())
    def compact(self, full: bool) -> None:
        self.engine.compact(full=full)

    @rule()
    def reopen(self) -> None:
        self.engine.close()
        self.engine = small_engine(self.disk, tiers=self.tiers)

    @rule(data=st.data())
    def crash_after_sync(self, data: st.DataObject) -> None:
        self.engine.sync()
        self.disk.crash(random.Random(data.draw(st.integers(0, 2**32))))
        self.engine = small_engine(self.disk, tiers=self.tiers)
        assert self.engine.recovery.bytes_truncated == 0  # everything was synced: nothing torn

    @invariant()
    def stats_are_sane(self) -> None:
        s = self.engine.stats()
        assert s.sstables == len(self.engine.table_names)
        assert s.memtable_keys >= 0 and s.disk_bytes >= s.sstable_bytes


EngineVsDict.TestCase.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)
TestEngineVsDict = EngineVsDict.TestCase


def test_reads_and_writes_check_their_arguments() -> None:
    eng = small_engine()
    with pytest.raises(TypeError, match="bytes"):
        eng.put("k", b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes"):
        eng.delete(1)  # type: ignore[arg-type]
    eng.close()
    with pytest.raises(EngineClosedError, match="closed"):
        eng.get(b"k")


def test_a_failed_write_poisons_the_engine_until_reopened() -> None:
    disk = SimDisk()
    eng = small_engine(disk)
    eng.put(b"a", b"1")
    eng.sync()
    disk.crash_at = disk.ops + 1
    with pytest.raises(SimulatedCrash):
        eng.put(b"b", b"2")
    with pytest.raises(EngineFailedError, match="reopen it"):
        eng.get(b"a")
    disk.crash(torn=False)
    assert small_engine(disk).get(b"a") == b"1"


def test_recovery_report_after_a_torn_tail() -> None:
    disk = SimDisk()
    eng = small_engine(disk, memtable_bytes=1 << 20)
    for i in range(10):
        eng.put(b"k%d" % i, b"v" * 20)
    eng.sync()
    eng.put(b"late", b"x" * 30)  # a 51-byte record, never synced
    kept = disk.crash(random.Random(0))  # seed 0 keeps 24 of its 47 bytes: a torn tail
    assert list(kept.values()) == [24]
    eng = small_engine(disk)
    r = eng.recovery
    assert (r.records_replayed, r.bytes_truncated) == (10, 24)
    end = r.wal[0].bytes_replayed
    assert r.messages == [
        f"WAL {r.wal[0].name}: truncated a torn tail of 24 bytes at offset {end} after 10 records"
    ]
    assert eng.take_corruptions() == []  # a torn tail is not corruption
    assert r.messages[0] in r.summary and r.messages[0] in eng.stats().last_recovery
    assert all(eng.get(b"k%d" % i) == b"v" * 20 for i in range(10))
    assert eng.get(b"late") is None


def test_missing_manifest_with_tables_refuses_to_guess() -> None:
    disk = SimDisk()
    eng = small_engine(disk)
    eng.put(b"a", b"1")
    eng.flush()
    eng.close()
    disk.remove("/db/MANIFEST")
    with pytest.raises(CorruptManifestError, match="MANIFEST is missing but SSTables exist"):
        small_engine(disk)


def test_corrupt_manifest_is_a_clear_error() -> None:
    disk = SimDisk()
    small_engine(disk).close()
    disk.flip_bit("/db/MANIFEST", bit=8 * 40)
    with pytest.raises(CorruptManifestError, match="MANIFEST checksum mismatch"):
        small_engine(disk)


def test_snapshot_is_hard_links_and_opens_as_an_engine(tmp_path: Path) -> None:
    disk = RealDisk()
    data, snap, restored = str(tmp_path / "data"), str(tmp_path / "snap"), str(tmp_path / "restored")
    opts = replace(SMALL, memtable_bytes=4000)
    eng = LSMEngine(disk, data, opts)
    for i in range(200):
        eng.put(b"k%03d" % i, b"v%d" % i)
    eng.sync()
    names = eng.snapshot(snap)
    assert names == eng.table_names and names
    for name in names:
        a, b = os.stat(os.path.join(data, name)), os.stat(os.path.join(snap, name))
        assert a.st_ino == b.st_ino and a.st_nlink >= 2
    # Later writes and compactions of the live engine do not touch the snapshot.
    for i in range(200):
        eng.put(b"k%03d" % i, b"changed")
    eng.compact(full=True)
    eng.close()
    with LSMEngine(disk, snap, opts) as snapshot:
        assert [v for _, v in snapshot.scan()] == [b"v%d" % i for i in range(200)]
    restore_snapshot(disk, snap, restored)
    with LSMEngine(disk, restored, opts) as again:
        assert again.get(b"k007") == b"v7"
    with pytest.raises(ValueError, match="not empty"):
        LSMEngine(disk, data, opts).snapshot(snap)


def test_engine_on_the_real_disk_survives_reopen(tmp_path: Path) -> None:
    disk = RealDisk()
    opts = EngineOptions(memtable_bytes=2000, block_bytes=256)
    eng = LSMEngine(disk, str(tmp_path), opts)
    for i in range(300):
        eng.put(b"%04d" % i, b"x" * (i % 17))
        if i % 7 == 0:
            eng.delete(b"%04d" % (i // 2))
    eng.sync()
    want = dict(eng.scan())
    stats = eng.stats()
    assert stats.flushes > 0 and stats.fsyncs > 0 and stats.bytes_written > 0
    eng.close()
    again = LSMEngine(disk, str(tmp_path), opts)
    assert dict(again.scan()) == want
    assert sorted(f for f in os.listdir(tmp_path) if not f.endswith((".sst", ".log"))) == ["MANIFEST"]


def test_a_corrupt_wal_record_costs_only_itself_is_reported_once_and_the_log_retired() -> None:
    disk = SimDisk()
    eng = small_engine(disk, memtable_bytes=1 << 20)
    for i in range(500):
        eng.put(b"k%03d" % i, b"v" * 20)
    eng.sync()
    [log] = [n for n in disk.listdir("/db") if n.endswith(".log")]
    eng.close()
    record = wal.HEADER_SIZE + len(encode_op(1, b"k000", b"v" * 20))
    at = wal.FILE_HEADER_SIZE + 3 * record  # k003's record
    disk.flip_bit(f"/db/{log}", bit=8 * (at + 20))
    eng = small_engine(disk, memtable_bytes=1 << 20)
    [c] = eng.take_corruptions()
    assert (c.kind, c.file, c.offset, c.length) == ("wal_record", f"/db/{log}", at, record)
    assert eng.get(b"k003") is None
    assert all(eng.get(b"k%03d" % i) == b"v" * 20 for i in range(500) if i != 3)  # 499 of 500
    assert not disk.exists(f"/db/{log}")  # flushed at open: the damage is not met again
    eng.close()
    again = small_engine(disk)
    assert again.take_corruptions() == [] and again.get(b"k499") == b"v" * 20


def test_a_directory_with_a_format_1_wal_still_opens() -> None:
    disk = SimDisk()
    small_engine(disk).close()  # a directory as an older build leaves it: MANIFEST, one log
    [log] = [n for n in disk.listdir("/db") if n.endswith(".log")]
    disk.remove(f"/db/{log}")
    f = disk.open_append(f"/db/{log}")
    for i in range(5):
        payload = encode_op(1, b"old%d" % i, b"value %d" % i)
        length = len(payload).to_bytes(4, "little")
        f.write(length + zlib.crc32(payload, zlib.crc32(length)).to_bytes(4, "little") + payload)
    f.sync()
    f.close()
    eng = small_engine(disk)
    assert [eng.get(b"old%d" % i) for i in range(5)] == [b"value %d" % i for i in range(5)]
    assert eng.recovery.wal[0].version == 1 and eng.take_corruptions() == []
    assert not disk.exists(f"/db/{log}")  # flushed at open: no format-2 record joins a format-1 file
    eng.put(b"new", b"x")
    eng.close()
    again = small_engine(disk)
    assert again.get(b"old4") == b"value 4" and again.get(b"new") == b"x"
