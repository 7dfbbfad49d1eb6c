"""The WAL archive of a snapshot and point-in-time restore, on the engine alone (a handed clock)."""

from __future__ import annotations

import pytest

from bhandar_cli.storage import archive, pitr
from bhandar_cli.storage.disk.sim_disk import SimDisk
from bhandar_cli.storage.engine import LSMEngine
from bhandar_cli.storage.engine_options import EngineOptions
from bhandar_cli.storage.recovery import restore_snapshot


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1.0  # every write a second later than the one before
        return self.now


def _engine(disk: SimDisk, clock: Clock, archive_bytes: int = 1 << 30) -> LSMEngine:
    options = EngineOptions(memtable_bytes=600, wall_clock=clock, archive_bytes=archive_bytes)
    return LSMEngine(disk, "data", options)


def test_the_wals_after_a_snapshot_survive_flushes_and_restore_stops_at_a_time() -> None:
    disk, clock = SimDisk(), Clock()
    eng = _engine(disk, clock)
    for i in range(20):
        eng.put(b"a%02d" % i, b"x" * 20)
    eng.snapshot("snap")
    for i in range(40):  # several memtables: their WALs are flushed and archived, not deleted
        eng.put(b"b%02d" % i, b"y" * 20)
    cut = clock.now
    for i in range(30):
        eng.put(b"c%02d" % i, b"z" * 20)
    eng.sync()
    archived_before_close = archive.archived_logs(disk, "snap")
    assert len(archived_before_close) >= 2
    assert eng.stats().archives == 1 and eng.stats().archived_wal_bytes > 0
    eng.close()
    archive.close_all(disk, "data", 1 << 30, 0.0)  # a restore first takes the live WALs too
    assert archive.verify(disk, "snap") >= len(archived_before_close)
    split = pitr.split(disk, "snap", cut)
    assert [k for k, _ in split.kept_keys] == [b"b%02d" % i for i in range(40)]
    assert [k for k, _ in split.discarded_keys] == [b"c%02d" % i for i in range(30)]
    assert split.first_discarded is not None and split.first_discarded > cut
    restore_snapshot(disk, "snap", "restored", split.kept)
    with LSMEngine(disk, "restored") as again:
        keys = [k for k, _ in again.scan()]
    assert keys == [b"a%02d" % i for i in range(20)] + [b"b%02d" % i for i in range(40)]


def test_an_archive_is_bounded_and_says_it_is_full() -> None:
    disk, clock = SimDisk(), Clock()
    eng = _engine(disk, clock, archive_bytes=1500)
    eng.snapshot("snap")
    for i in range(200):
        eng.put(b"k%03d" % i, b"v" * 20)
    info = archive.ArchiveInfo.load(disk, "snap")
    assert info is not None and info.full and 0 < info.bytes <= 1500
    assert archive.active(disk, "data") == []  # it no longer holds WALs back
    assert eng.stats().archives == 0
    eng.close()


def test_a_damaged_archived_wal_fails_verification_naming_it() -> None:
    disk, clock = SimDisk(), Clock()
    eng = _engine(disk, clock)
    eng.snapshot("snap")
    for i in range(60):
        eng.put(b"k%03d" % i, b"v" * 20)
    eng.close()
    victim = archive.archived_logs(disk, "snap")[0]
    data = bytearray(disk.read(victim))
    data[20] ^= 0x01
    disk.remove(victim)
    f = disk.open_append(victim)
    f.write(bytes(data))
    f.sync()
    f.close()
    with pytest.raises(archive.SnapshotDamaged, match="checksum mismatch") as caught:
        archive.verify(disk, "snap")
    assert caught.value.path == victim
