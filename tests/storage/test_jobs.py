"""Background jobs: real worker threads beside a writing owner, stale inputs discarded at finish,
finish after close, backpressure, and at most one job of each kind in flight."""

from __future__ import annotations

import random
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from bhandar_cli.storage.compaction import TierPolicy
from bhandar_cli.storage.disk.real_disk import RealDisk
from bhandar_cli.storage.disk.sim_disk import SimDisk
from bhandar_cli.storage.engine import LSMEngine
from bhandar_cli.storage.jobs import BackgroundJob, CompactionJob, FlushJob
from bhandar_cli.storage.record_kinds import Merge
from bhandar_cli.storage.reports import JobReport

from .conftest import SMALL, apply_op, small_engine, union


def _fill_until_sealed(eng: LSMEngine, sealed: int, prefix: bytes = b"pad", stalls: int = 0) -> int:
    """Write distinct keys until `sealed` memtables wait for a flush and `stalls` writes stalled;
    returns how many were written."""
    for i in range(10_000):
        s = eng.stats()
        if s.sealed_memtables >= sealed and s.write_stalls >= stalls:
            return i
        eng.put(b"%s%05d" % (prefix, i), b"x" * 40)
    raise AssertionError(f"still {s.sealed_memtables} sealed memtables and {s.write_stalls} stalls")


@pytest.mark.parametrize("merge", [None, union], ids=["newest-wins", "merge"])
@pytest.mark.parametrize("where", ["sim", "real"])
def test_worker_threads_run_jobs_and_syncs_while_the_owner_writes_and_reads(
    where: str, merge: Merge | None, tmp_path: Path
) -> None:
    disk = SimDisk() if where == "sim" else RealDisk()
    root = "/db" if where == "sim" else str(tmp_path / "db")
    opts = replace(
        SMALL,
        memtable_bytes=12_000,
        block_bytes=512,
        tiers=TierPolicy(min_tables=3, small_table_bytes=1 << 20),
    )
    eng = LSMEngine(disk, root, opts, merge)
    rng = random.Random(5)
    model: dict[bytes, bytes] = {}
    keys = [b"k%04d" % i for i in range(600)]
    pool = ThreadPoolExecutor(max_workers=3)
    running: dict[Future[None], BackgroundJob] = {}
    syncs: list[Future[None]] = []
    reports: list[JobReport] = []
    writes_beside_a_job = 0

    def finish_done() -> None:
        for future in [f for f in running if f.done()]:
            future.result()  # run() never raises
            reports.append(running.pop(future).finish())

    for i in range(5000):
        key = rng.choice(keys)
        if rng.random() < 0.1:
            op: tuple[bytes, bytes | None] = (key, None)
            eng.delete(key)
        else:
            op = (key, b"v%d" % i + b"." * rng.randrange(30))
            eng.put(key, op[1])
        apply_op(model, op, merge)
        writes_beside_a_job += any(not f.done() for f in running)
        finish_done()
        while (job := eng.background_job()) is not None:
            running[pool.submit(job.run)] = job
        if i % 40 == 0 and (fsync := eng.begin_sync()) is not None:
            syncs.append(pool.submit(fsync))
        if i % 7 == 0:
            probe = rng.choice(keys)
            assert eng.get(probe) == model.get(probe)
        if i % 1000 == 999:
            assert dict(eng.scan()) == model
    for future in list(running):
        future.result()
    finish_done()
    for future in syncs:
        future.result()
    pool.shutdown()

    installed = {r.kind for r in reports if r.installed}
    # Flushes and compactions go to the workers, unless the workers fall so far behind (a loaded
    # machine) that writes stall and run the jobs inline: either way they ran (counted below).
    assert installed == {"flush", "compaction"} or eng.stats().write_stalls > 0, installed
    assert eng.flushes > 0 and eng.compactions > 0
    assert writes_beside_a_job > 0  # the owner really wrote while workers built tables
    assert dict(eng.scan()) == model
    eng.sync()
    eng.close()
    again = LSMEngine(disk, root, opts, merge)
    assert dict(again.scan()) == model
    assert all(again.get(k) == model.get(k) for k in keys)


def test_finish_after_close_changes_nothing_and_the_next_open_deletes_the_output() -> None:
    disk = SimDisk()
    eng = small_engine(disk, auto_compact=False)
    written = _fill_until_sealed(eng, 1)
    job = eng.background_job()
    assert isinstance(job, FlushJob)
    job.run()
    eng.close()
    ops = disk.ops
    report = job.finish()
    assert (report.installed, report.reason) == (False, "the engine was closed")
    assert disk.ops == ops  # not one disk operation
    assert disk.exists(job.output.path)  # an orphan now
    again = small_engine(disk)
    assert job.output.name in again.recovery.orphans_removed
    assert all(again.get(b"pad%05d" % i) == b"x" * 40 for i in range(written))


def test_a_job_of_an_engine_reopened_meanwhile_never_touches_the_new_one() -> None:
    disk = SimDisk()
    eng = small_engine(disk, auto_compact=False)
    _fill_until_sealed(eng, 1)
    job = eng.background_job()
    assert job is not None
    eng.close()
    fresh = small_engine(disk)  # deletes the job's file as an orphan; its number stays taken
    job.run()
    assert not job.finish().installed
    written = _fill_until_sealed(fresh, 2, prefix=b"new")  # allocates tables and logs again
    fresh.flush()
    assert all(fresh.get(b"new%05d" % i) == b"x" * 40 for i in range(written))
    assert fresh.stats().flushes >= 2


def _three_tables(disk: SimDisk) -> LSMEngine:
    eng = small_engine(disk, block_cache_bytes=0)  # SMALL: min_tables=3, so three small tables are due
    for t in range(3):
        eng.put(b"t%d" % t, b"only in table %d" % t)
        eng.put(b"shared", b"from table %d" % t)
        eng.flush()
    return eng


def test_a_compaction_whose_input_was_quarantined_meanwhile_is_discarded() -> None:
    disk = SimDisk()
    eng = _three_tables(disk)
    job = eng.background_job()
    assert isinstance(job, CompactionJob) and len(job.inputs) == 3
    job.run()
    newest = eng.table_names[-1]
    disk.truncate(f"/db/{newest}", 3)  # cut short: the table cannot be read any more
    assert eng.get(b"t2") is None  # the read finds the damage: quarantined
    report = job.finish()
    assert not report.installed and "quarantined" in report.reason
    assert not disk.exists(job.output.path)
    assert job.output.name not in eng.table_names and len(eng.table_names) == 2
    assert eng.get(b"shared") == b"from table 1" and eng.stats().jobs_discarded == 1


def test_a_compaction_that_meets_a_bad_block_skips_it_says_so_and_keeps_the_file_aside() -> None:
    disk = SimDisk()
    eng = _three_tables(disk)
    oldest = eng.table_names[0]
    disk.flip_bit(f"/db/{oldest}", bit=8 * 5)  # its only block: t0 and shared from table 0
    job = eng.background_job()
    assert isinstance(job, CompactionJob)
    job.run()
    report = job.finish()
    assert report.installed and report.compaction is not None
    [c] = eng.take_corruptions()
    assert (c.kind, c.file, c.offset) == ("sstable_block", f"/db/{oldest}", 0)
    assert oldest not in eng.table_names and disk.exists(f"/db/quarantine/{oldest}")
    assert eng.get(b"t1") == b"only in table 1" and eng.get(b"t0") is None
    assert eng.get(b"shared") == b"from table 2"


def test_a_compaction_whose_inputs_were_compacted_inline_is_discarded() -> None:
    disk = SimDisk()
    eng = _three_tables(disk)
    job = eng.background_job()
    assert isinstance(job, CompactionJob)
    [full] = eng.compact(full=True)  # the same inputs, merged on the owner thread first
    job.run()
    report = job.finish()
    assert not report.installed and "compacted" in report.reason
    assert eng.table_names == [full.output] and not disk.exists(job.output.path)
    assert eng.get(b"shared") == b"from table 2"


def test_a_flush_whose_memtable_was_flushed_inline_is_discarded() -> None:
    disk = SimDisk()
    eng = small_engine(disk, auto_compact=False)
    written = _fill_until_sealed(eng, 1)
    job = eng.background_job()
    assert isinstance(job, FlushJob)
    eng.flush()
    job.run()
    report = job.finish()
    assert not report.installed and report.reason == "its memtable was flushed meanwhile"
    assert len(eng.table_names) == 1 and not disk.exists(job.output.path)
    assert eng.stats().flushes == 1
    assert all(eng.get(b"pad%05d" % i) == b"x" * 40 for i in range(written))


def test_writes_stall_to_flush_when_too_many_sealed_memtables_wait() -> None:
    disk = SimDisk()
    eng = small_engine(disk, auto_compact=False, max_sealed_memtables=2)
    _fill_until_sealed(eng, 2)
    s = eng.stats()
    assert (s.sealed_memtables, s.write_stalls, s.flushes) == (2, 0, 0)  # nobody ran a job
    flight = eng.background_job()  # a flush of the oldest, handed out and then left running
    assert flight is not None
    written = _fill_until_sealed(eng, 2, prefix=b"more", stalls=1)  # the third seal stalls
    s = eng.stats()
    assert (s.sealed_memtables, s.write_stalls, s.flushes) == (2, 1, 1)
    flight.run()
    assert not flight.finish().installed  # its memtable went to a table in the stalled write
    assert eng.stats().jobs_discarded == 1
    assert all(eng.get(b"more%05d" % i) == b"x" * 40 for i in range(written))


def test_a_write_that_stalls_also_compacts_when_no_compaction_is_in_flight() -> None:
    eng = small_engine(SimDisk(), max_sealed_memtables=0)  # every seal stalls: no driver needed
    for i in range(400):
        eng.put(b"k%03d" % (i % 97), b"v%d" % i)
    s = eng.stats()
    assert s.write_stalls == s.flushes > 3 and s.compactions > 0 and s.sealed_memtables == 0


def test_one_job_of_each_kind_in_flight() -> None:
    disk = SimDisk()
    eng = _three_tables(disk)  # a compaction is due
    _fill_until_sealed(eng, 1)
    flush = eng.background_job()
    compaction = eng.background_job()
    assert isinstance(flush, FlushJob) and isinstance(compaction, CompactionJob)
    assert eng.background_job() is None and eng.stats().jobs_in_flight == 2
    flush.run()
    assert eng.background_job() is None  # ran, not finished: still in flight
    assert flush.finish().installed
    assert eng.background_job() is None  # nothing else is due
    compaction.run()
    assert compaction.finish().installed
    assert eng.stats().jobs_in_flight == 0
    assert eng.background_job() is None


def test_reads_fold_the_live_and_sealed_memtables_and_the_tables_in_age_order() -> None:
    eng = LSMEngine(SimDisk(), "/db", replace(SMALL, auto_compact=False), merge=union)
    eng.put(b"k", b"a")
    eng.flush()
    eng.put(b"k", b"b")
    _fill_until_sealed(eng, 1)
    eng.put(b"gone", b"old")
    _fill_until_sealed(eng, 2, prefix=b"pad2")
    eng.put(b"k", b"c")
    eng.delete(b"gone")
    assert eng.stats().sealed_memtables == 2
    assert eng.get(b"k") == b"a,b,c" and eng.get(b"gone") is None
    assert dict(eng.scan(b"g", b"l")) == {b"k": b"a,b,c"}
    eng.delete(b"k")
    eng.put(b"k", b"d")  # over a deletion: nothing older counts
    assert eng.get(b"k") == b"d"


def test_finish_and_run_are_called_once_in_order() -> None:
    eng = small_engine(SimDisk(), auto_compact=False)
    _fill_until_sealed(eng, 1)
    job = eng.background_job()
    assert job is not None
    with pytest.raises(RuntimeError, match="after run"):
        job.finish()
    job.run()
    with pytest.raises(RuntimeError, match="runs once"):
        job.run()
    assert job.finish().installed
    with pytest.raises(RuntimeError, match="comes once"):
        job.finish()
