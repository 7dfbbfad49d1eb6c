"""WAL framing, fsync policies and recovery of torn or corrupt tails."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bhandar_cli.node.disk import RealDisk
from bhandar_cli.sim.disk import SimDisk
from bhandar_cli.storage import wal
from bhandar_cli.storage.wal import FsyncPolicy, WALWriter


def _write(disk: SimDisk | RealDisk, path: str, payloads: list[bytes], policy: str = "batch") -> None:
    w = WALWriter(disk, path, FsyncPolicy(policy))
    for p in payloads:
        w.append(p)
    w.sync()
    w.close()


def test_round_trip_on_the_real_disk(tmp_path: Path) -> None:
    path = str(tmp_path / "000001.log")
    payloads = [b"", b"a", b"x" * 5000, bytes(range(256))]
    _write(RealDisk(), path, payloads)
    got, report = wal.replay(RealDisk(), path, "000001.log")
    assert got == payloads
    assert (report.records, report.bytes_truncated, report.problem) == (4, 0, "")
    assert report.message == f"WAL 000001.log: replayed 4 records ({report.bytes_replayed} bytes), clean"


@given(st.lists(st.binary(max_size=64), max_size=20), st.data())
def test_any_cut_of_the_log_replays_exactly_the_whole_records_before_it(
    payloads: list[bytes], data: st.DataObject
) -> None:
    blob = b"".join(wal.frame(p) for p in payloads)
    cut = data.draw(st.integers(0, len(blob)))
    got, good, problem = wal.parse(blob[:cut])
    ends = [0]
    for p in payloads:
        ends.append(ends[-1] + wal.HEADER_SIZE + len(p))
    whole = max(i for i, e in enumerate(ends) if e <= cut)
    assert got == payloads[:whole]
    assert good == ends[whole]
    assert problem == ("" if cut == ends[whole] else "torn")


def test_torn_tail_is_truncated_and_reported() -> None:
    disk = SimDisk()
    disk.makedirs("/w")
    path = "/w/000003.log"
    _write(disk, path, [b"record %d" % i for i in range(1204)])
    good_size = disk.size(path)
    f = disk.open_append(path)
    f.write(wal.frame(b"the unacknowledged one")[:17])  # the crash hit mid-append
    got, report = wal.replay(disk, path, "000003.log")
    assert len(got) == 1204
    assert report.problem == "torn"
    assert report.bytes_truncated == 17
    assert report.message == "WAL 000003.log: truncated a torn tail of 17 bytes after 1204 records"
    assert disk.size(path) == good_size  # the garbage is gone, appends continue cleanly
    again, second = wal.replay(disk, path, "000003.log")
    assert len(again) == 1204 and second.problem == ""


def test_corrupt_record_stops_replay_there_and_says_so() -> None:
    disk = SimDisk()
    disk.makedirs("/w")
    path = "/w/000001.log"
    _write(disk, path, [b"a" * 10, b"b" * 10, b"c" * 10])
    disk.flip_bit(path, bit=8 * (wal.HEADER_SIZE + 10 + wal.HEADER_SIZE + 3))  # inside record 2
    got, report = wal.replay(disk, path, "000001.log")
    assert got == [b"a" * 10]
    assert report.problem == "corrupt"
    assert report.bytes_truncated == 2 * (wal.HEADER_SIZE + 10)
    assert "corrupt record" in report.message and "after 1 records" in report.message


def test_a_damaged_length_field_is_caught() -> None:
    blob = wal.frame(b"hello") + wal.frame(b"world")
    damaged = bytearray(blob)
    damaged[0] ^= 0x01  # length 5 -> 4: the CRC covers the length, so this cannot pass
    got, good, problem = wal.parse(bytes(damaged))
    assert got == [] and good == 0 and problem


@pytest.mark.parametrize(("policy", "fsyncs"), [("always", 10), ("batch", 1), ("none", 0)])
def test_fsync_policies(policy: str, fsyncs: int) -> None:
    disk = SimDisk()
    disk.makedirs("/w")
    _write(disk, "/w/000001.log", [b"r"] * 10, policy)
    assert disk.fsync_count == fsyncs


def test_batch_records_are_lost_on_crash_until_sync() -> None:
    disk = SimDisk()
    disk.makedirs("/w")
    w = WALWriter(disk, "/w/000001.log")
    w.append(b"acked")
    w.sync()
    w.append(b"not yet")
    disk.crash(torn=False)
    got, _ = wal.replay(disk, "/w/000001.log", "000001.log")
    assert got == [b"acked"]
