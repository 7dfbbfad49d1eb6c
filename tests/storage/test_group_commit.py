"""begin_sync: group commit whose fsync runs on another thread, and the WAL gap check at recovery."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bhandar_cli.storage.disk.real_disk import RealDisk
from bhandar_cli.storage.disk.sim_disk import SimDisk, SimulatedCrash
from bhandar_cli.storage.engine import LSMEngine
from bhandar_cli.storage.storage_errors import EngineFailedError
from bhandar_cli.storage.wal import FsyncPolicy

from .conftest import small_engine


def _fill_until_sealed(eng: LSMEngine, prefix: bytes) -> int:
    i = 0
    while not eng.stats().sealed_memtables:
        eng.put(b"%s%05d" % (prefix, i), b"y" * 30)
        i += 1
    return i


def test_nothing_to_sync_is_none_and_a_sync_in_a_thread_makes_writes_durable() -> None:
    disk = SimDisk()
    eng = small_engine(disk)
    assert eng.begin_sync() is None
    eng.put(b"a", b"1")
    fsync = eng.begin_sync()
    assert fsync is not None
    worker = threading.Thread(target=fsync)
    worker.start()
    worker.join()
    eng.put(b"late", b"not synced")
    disk.crash(torn=False)
    again = small_engine(disk)
    assert again.get(b"a") == b"1" and again.get(b"late") is None


def test_a_sync_covers_the_wals_of_sealed_memtables_too() -> None:
    disk = SimDisk()
    eng = small_engine(disk, auto_compact=False)
    written = _fill_until_sealed(eng, b"s")  # the sealed memtable's WAL was never fsynced
    eng.put(b"after", b"seal")
    fsync = eng.begin_sync()
    assert fsync is not None
    fsync()
    disk.crash(torn=False)
    again = small_engine(disk)
    assert again.get(b"after") == b"seal"
    assert all(again.get(b"s%05d" % i) == b"y" * 30 for i in range(written))


def test_a_later_sync_covers_records_an_earlier_sync_took_even_if_that_one_never_runs() -> None:
    disk = SimDisk()
    eng = small_engine(disk)
    eng.put(b"a", b"1")
    abandoned = eng.begin_sync()  # a driver cancelled before its thread started
    assert abandoned is not None
    later = eng.begin_sync()  # no new write, but "a" is not durable yet
    assert later is not None
    later()
    disk.crash(torn=False)
    assert small_engine(disk).get(b"a") == b"1"


def test_a_sync_never_reports_success_after_an_earlier_one_failed() -> None:
    disk = SimDisk()
    eng = small_engine(disk)
    eng.put(b"a", b"1")
    first = eng.begin_sync()
    eng.put(b"b", b"2")
    second = eng.begin_sync()
    assert first is not None and second is not None
    disk.crash_at = disk.ops + 1
    with pytest.raises(SimulatedCrash, match="during fsync"):
        first()
    # Its own fsyncs succeed, but after a failed fsync the kernel may have dropped the pages.
    with pytest.raises(EngineFailedError, match="an earlier WAL fsync failed"):
        second()
    with pytest.raises(EngineFailedError, match="reopen it"):
        eng.put(b"c", b"3")  # the owner learned of the failure: poisoned


def test_the_wal_may_be_closed_and_deleted_while_its_sync_is_pending(tmp_path: Path) -> None:
    disk = RealDisk()
    eng = LSMEngine(disk, str(tmp_path / "db"))
    eng.put(b"a", b"1")
    fsync = eng.begin_sync()
    assert fsync is not None
    logs = sorted(p.name for p in (tmp_path / "db").iterdir() if p.suffix == ".log")
    eng.flush()  # closes the WAL that sync holds and deletes its file
    assert not (tmp_path / "db" / logs[0]).exists()
    fsyncs = disk.fsync_count
    fsync()  # its own descriptor still names the file
    assert disk.fsync_count == fsyncs + 1
    with pytest.raises(RuntimeError, match="already ran"):
        fsync()
    eng.close()


def test_under_policy_none_there_is_never_an_fsync_to_hand_out() -> None:
    disk = SimDisk()
    eng = small_engine(disk, fsync=FsyncPolicy.NONE)
    fsyncs = disk.fsync_count  # the MANIFEST written at open
    eng.put(b"a", b"1")
    assert eng.begin_sync() is None and disk.fsync_count == fsyncs


def test_recovery_stops_at_a_gap_between_wal_files() -> None:
    """A crash kept the newer WAL's unsynced writes but lost the tail of the sealed one."""
    disk = SimDisk()
    eng = small_engine(disk, auto_compact=False)
    eng.put(b"first", b"synced")
    eng.sync()
    _fill_until_sealed(eng, b"lost")
    eng.put(b"newer", b"kept by the disk")
    logs = sorted(n for n in disk.listdir("/db") if n.endswith(".log"))
    disk.fsync(f"/db/{logs[-1]}")  # the kernel wrote the newer file back first
    disk.crash(torn=False)
    again = small_engine(disk)
    assert again.get(b"first") == b"synced"
    assert again.get(b"newer") is None  # issued after writes that were lost: not replayed
    assert again.get(b"lost00000") is None
    [gap] = [r for r in again.recovery.wal if r.problem == "gap"]
    assert gap.name == logs[-1] and not disk.exists(f"/db/{logs[-1]}")
    assert any("older WAL lost" in m for m in again.recovery.messages)


def test_recovery_replays_every_wal_when_nothing_was_lost() -> None:
    disk = SimDisk()
    eng = small_engine(disk, auto_compact=False)
    written = _fill_until_sealed(eng, b"w")
    eng.put(b"newer", b"1")
    eng.sync()
    disk.crash(torn=False)
    again = small_engine(disk)
    assert again.get(b"newer") == b"1" and all(again.get(b"w%05d" % i) for i in range(written))
    assert [r.problem for r in again.recovery.wal] == ["", ""]
    assert again.recovery.records_replayed == written + 1  # the link record is not counted
