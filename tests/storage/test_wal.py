"""WAL framing, fsync policies, and recovery: a torn tail is cut, a corrupt record in the middle
costs only itself, format-1 logs are still read."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bhandar_cli.storage import wal
from bhandar_cli.storage.disk.real_disk import RealDisk
from bhandar_cli.storage.disk.sim_disk import SimDisk
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
    assert report.version == 2 and Path(path).read_bytes().startswith(b"BHNDRWAL")


@given(st.lists(st.binary(max_size=64), max_size=20), st.data())
def test_any_cut_of_the_log_replays_exactly_the_whole_records_before_it(
    payloads: list[bytes], data: st.DataObject
) -> None:
    blob = wal.FILE_HEADER + b"".join(wal.frame(p) for p in payloads)
    cut = data.draw(st.integers(wal.FILE_HEADER_SIZE, len(blob)))
    log = wal.parse(blob[:cut])
    ends = [wal.FILE_HEADER_SIZE]
    for p in payloads:
        ends.append(ends[-1] + wal.HEADER_SIZE + len(p))
    whole = max(i for i, e in enumerate(ends) if e <= cut)
    assert log.payloads == payloads[:whole] and log.corrupt == ()
    assert log.end == ends[whole]
    assert log.problem == ("" if cut == ends[whole] else "torn")


def test_a_torn_file_header_is_an_empty_log() -> None:
    for cut in range(wal.FILE_HEADER_SIZE):
        log = wal.parse(wal.FILE_HEADER[:cut])
        assert (log.payloads, log.end, log.problem) == ([], 0, "")


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
    assert report.corrupt == ()  # a torn tail is a crash's trace, not corruption
    assert report.message == (
        f"WAL 000003.log: truncated a torn tail of 17 bytes at offset {good_size} after 1204 records"
    )
    assert disk.size(path) == good_size  # the garbage is gone, appends continue cleanly
    again, second = wal.replay(disk, path, "000003.log")
    assert len(again) == 1204 and second.problem == ""


def _offset_of(i: int, size: int) -> int:
    """Where record i starts in a log of records of `size` bytes each."""
    return wal.FILE_HEADER_SIZE + i * (wal.HEADER_SIZE + size)


@pytest.mark.parametrize("where", [0, 4, 8, 12, 15])  # magic, length, CRC, payload: any byte
def test_a_corrupt_record_in_the_middle_loses_only_itself(where: int) -> None:
    disk = SimDisk()
    disk.makedirs("/w")
    path = "/w/000001.log"
    payloads = [b"%04d" % i + b"x" * 6 for i in range(500)]
    _write(disk, path, payloads)
    size = disk.size(path)
    at = _offset_of(3, 10)
    disk.flip_bit(path, bit=8 * (at + where))
    got, report = wal.replay(disk, path, "000001.log")
    assert got == payloads[:3] + payloads[4:]  # 499 of 500: the rest read back
    assert report.problem == "" and report.bytes_truncated == 0 and disk.size(path) == size
    assert report.corrupt == (wal.CorruptSpan(at, wal.HEADER_SIZE + 10),)
    assert f"skipped {wal.HEADER_SIZE + 10} corrupt bytes at offset {at}" in report.message


def test_corruption_and_a_torn_tail_are_told_apart() -> None:
    payloads = [b"r%d" % i for i in range(6)]
    blob = bytearray(wal.FILE_HEADER + b"".join(wal.frame(p) for p in payloads))
    blob[_offset_of(1, 2) + 13] ^= 0x40  # record 1's payload
    torn = bytes(blob) + wal.frame(b"cut off")[:9]
    log = wal.parse(torn)
    assert log.payloads == [payloads[0], *payloads[2:]]
    assert log.corrupt == (wal.CorruptSpan(_offset_of(1, 2), wal.HEADER_SIZE + 2),)
    assert log.problem == "torn" and log.end == len(blob)
    # The same damage in the LAST record, with nothing valid after it, is a torn tail.
    last = bytearray(wal.FILE_HEADER + b"".join(wal.frame(p) for p in payloads))
    last[-1] ^= 0x01
    log = wal.parse(bytes(last))
    assert log.payloads == payloads[:-1] and log.corrupt == () and log.problem == "torn"


def test_a_damaged_file_header_costs_no_record() -> None:
    blob = bytearray(wal.FILE_HEADER + wal.frame(b"hello") + wal.frame(b"world"))
    blob[9] ^= 0x02  # the version field
    log = wal.parse(bytes(blob))
    assert log.payloads == [b"hello", b"world"]
    assert log.corrupt == (wal.CorruptSpan(0, wal.FILE_HEADER_SIZE),)


def test_format_1_logs_are_still_read_up_to_their_first_bad_record() -> None:
    def v1_frame(payload: bytes) -> bytes:
        length = len(payload).to_bytes(4, "little")
        return length + zlib.crc32(payload, zlib.crc32(length)).to_bytes(4, "little") + payload

    blob = b"".join(v1_frame(p) for p in (b"a" * 10, b"b" * 10, b"c" * 10))
    log = wal.parse(blob)
    assert (log.payloads, log.version, log.problem) == ([b"a" * 10, b"b" * 10, b"c" * 10], 1, "")
    log = wal.parse(blob[:-3])
    assert (log.payloads, log.problem) == ([b"a" * 10, b"b" * 10], "torn")
    damaged = bytearray(blob)
    damaged[18 + 8 + 3] ^= 0x01  # inside record 2
    log = wal.parse(bytes(damaged))
    assert log.payloads == [b"a" * 10] and log.problem == "corrupt" and log.end == 18
    assert log.corrupt == (wal.CorruptSpan(18, 36),)


def test_a_damaged_length_field_is_caught() -> None:
    blob = wal.FILE_HEADER + wal.frame(b"hello") + wal.frame(b"world")
    damaged = bytearray(blob)
    damaged[wal.FILE_HEADER_SIZE + 4] ^= 0x01  # length 5 -> 4: the CRC covers the length
    log = wal.parse(bytes(damaged))
    assert log.payloads == [b"world"] and log.corrupt[0].offset == wal.FILE_HEADER_SIZE


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
