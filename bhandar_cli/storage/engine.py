"""The LSM engine of one node: WAL → memtable → sealed memtables → SSTables, size-tiered compaction.

Directory layout: `MANIFEST` (live tables, see manifest.py), `NNNNNN.log` (WAL files), `NNNNNN.sst`
(tables), `quarantine/` (damaged tables, kept), `ARCHIVES` (snapshots keeping the WALs: archive.py),
`KEYCHECK` (the data key's id when `EngineOptions.cipher` encrypts the WALs and tables: cipher.py).

Ownership rule. All engine state (the memtables, the table list, the MANIFEST numbers, the WAL
writers, the block cache, the counters) belongs to one owner thread, the one that calls the
engine's methods (a node's event loop). Another thread only ever gets:
- a job (`background_job()`, jobs.py) holding immutable inputs (a sealed memtable, tables, its
  output file) and no path back to the engine: `run()` builds a file there, `finish()` back on
  the owner installs it;
- a sync function (`begin_sync()`, syncs.py) holding its own descriptors of the WAL files.
So nothing is shared mutably and no lock guards engine state: both threads read sealed
memtables and tables, which nobody changes; each sync's `SyncTicket` (`threading.Event`s) and
the disk's own counters (locked there) are the only things both write. A driver calls, for each
job, `run()` on a worker and then always `finish()` on the owner; a sync function at most once.
A flush or compaction whose inputs changed meanwhile (its memtable flushed inline, an input
quarantined or compacted away) is discarded at `finish` and its output deleted; after `close()`
`finish` does nothing (a reopen deletes the output as an orphan). Blocking versions (`flush`,
`compact`, `sync`) run the same jobs and syncs inline: begin, run, finish on the owner thread.
Here: writes, reads and syncs; tree.py: the sealed memtables and tables, and installing jobs.

Crash safety, step by step (a crash can stop any line; the Disk contract says what survives):
- write: apply to the memtable (a failing merge rejects the write before it is logged), append
  to the WAL. Acknowledge only after a sync returned (policy `batch`: it fsyncs every WAL file
  holding records not yet fsynced, sealed memtables' too) or after `put` returned (`always`).
  A failed append or fsync, here or in a worker, poisons the engine: it refuses every call
  until reopened.
- seal (the memtable is full): create the next WAL (durable on return), whose first record links
  to the sealed memtable's WAL and its final length, and write there from now on. The sealed
  WAL stays until its table is in the MANIFEST; nothing fsyncs it at the seal, so a crash may
  keep the newer WAL's bytes and lose the older one's tail: the link shows recovery that gap.
- backpressure: when more than `max_sealed_memtables` wait, the write that sealed one flushes the
  oldest itself (a stall), and then runs a due compaction if none is in flight.
- flush job: (worker) write the table and fsync it → (owner) rewrite MANIFEST atomically (new
  table listed, `log_number` = the first WAL of the next memtable) → delete the flushed WALs.
  Before the MANIFEST rename the new table is an orphan (deleted at open) and the WALs are
  replayed; after it, those WALs are obsolete. A table is never listed before it is durable,
  so a half-written one is never served.
- compaction job: (worker) write the merged table and fsync it → (owner) MANIFEST swaps the
  inputs for it → delete the inputs. Before the rename the output is an orphan; after it the
  inputs are.
- open: delete `*.tmp` and orphans, open (and by default verify) every listed table, replay WALs
  numbered ≥ `log_number` in order into one memtable, truncating a torn tail, and stopping at a
  gap (a WAL whose link names a longer predecessor than survived: it and later WALs are deleted;
  no write in them was acknowledged, since a sync fsyncs the older WALs too). Then keep
  appending to the newest WAL kept.

Corruption policy: damage costs only the records it hit (a bad SSTable block, a bad WAL stretch;
sstable.py and wal.py say how) and each corruption is reported once, with its file, offset and
the keys lost, through `take_corruptions()` (counted by kind in `stats().corruptions`). The
keys lost may read as older or missing until the store's anti-entropy repairs them from other
replicas; the caller asks for that repair at once. A damaged table is rewritten without its bad
blocks by the next compaction (tree.py); a WAL with a bad stretch is flushed at open; a table
that cannot be opened at all is moved to `quarantine/` and dropped from the MANIFEST.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from bhandar_cli.storage import archive, compaction, reads, recovery, wal
from bhandar_cli.storage.blocks import BlockCache
from bhandar_cli.storage.cipher import mark_key
from bhandar_cli.storage.damage import Corruption, DamageLog
from bhandar_cli.storage.disk import Disk
from bhandar_cli.storage.engine_options import EngineOptions
from bhandar_cli.storage.jobs import BackgroundJob
from bhandar_cli.storage.memtable import Memtable
from bhandar_cli.storage.record_kinds import DELETE, MERGE, VALUE, Merge, encode_op, encode_time_mark
from bhandar_cli.storage.reports import (
    CompactionReport,
    EngineStats,
    JobReport,
    RecoveryReport,
)
from bhandar_cli.storage.status import EngineStatus
from bhandar_cli.storage.storage_errors import CorruptTableError
from bhandar_cli.storage.syncs import GroupCommit
from bhandar_cli.storage.tree import Tree
from bhandar_cli.storage.wal import WALWriter

_T = TypeVar("_T")


def _run_inline(job: BackgroundJob) -> JobReport:
    job.run()
    return job.finish()


class LSMEngine:
    """A crash-safe sorted key-value store over a `Disk`. Keys and values are `bytes`.

    `merge(newer, older)`, if given, must be associative; every put is then a merge operand and
    reads fold a key's records newest to oldest (stopping at a deletion). Without it, newest wins.
    """

    def __init__(
        self, disk: Disk, directory: str, options: EngineOptions | None = None, merge: Merge | None = None
    ) -> None:
        self.disk, self.directory = disk, directory
        self.options = options or EngineOptions()
        self._merge = merge
        self._put_kind = VALUE if merge is None else MERGE
        self._cache = BlockCache(self.options.block_cache_bytes)
        self._status = EngineStatus(directory)
        self._commits = GroupCommit()
        self._damage = DamageLog()
        self.write_stalls = 0
        self.recovery = self._open()

    def _open(self) -> RecoveryReport:
        o, damage = self.options, self._damage
        r = recovery.recover(
            self.disk, self.directory, self._cache, damage, verify=o.verify_on_open, merge=self._merge,
            archive_limit=o.archive_bytes, cipher=o.cipher,
        )  # fmt: skip
        self._archiving = bool(archive.active(self.disk, self.directory))
        self._last_mark: float | None = None
        self._tree = Tree(self.disk, self.directory, o, self._cache, self._merge, self._status, r, damage)
        if o.cipher is not None:  # its sealed MANIFEST is stored: the directory is encrypted now
            mark_key(self.disk, self.directory, o.cipher)
        self._mem = r.memtable
        self._wal = WALWriter(self.disk, self._tree.log_path(self._tree.live_logs[-1]), o.fsync, o.cipher)
        mine = wal.FORMAT_VERSION if o.cipher is None else wal.ENCRYPTED_VERSION
        if any(w.corrupt or w.version != mine for w in r.wal_reports):
            # Retire these logs now: a damaged one would be reported again at every open, and an
            # older (or plain) format's file must not get records of this one appended.
            self._seal()
            self.flush()
        elif self._mem.approx_bytes >= o.memtable_bytes:
            self.flush()
        return RecoveryReport(
            self.directory, len(r.tables), tuple(r.wal_reports), tuple(r.orphans), tuple(r.quarantined)
        )

    def _check(self) -> None:
        self._collect_syncs()
        self._status.check()

    def _collect_syncs(self) -> None:
        if self._commits.busy and (error := self._commits.collect()) is not None:
            self._status.poison(error)  # a sync that ran in a worker failed

    # ---- writes ------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> None:
        """Write `value` (or merge it into the key's value). Durable after a sync under `batch`."""
        if type(key) is not bytes or type(value) is not bytes:
            raise TypeError(f"keys and values are bytes, got {type(key).__name__} and {type(value).__name__}")
        self._write(self._put_kind, key, value)

    def delete(self, key: bytes) -> None:
        """Write a deletion marker that hides every older value of `key`."""
        if type(key) is not bytes:
            raise TypeError(f"keys are bytes, got {type(key).__name__}")
        self._write(DELETE, key, b"")

    def _write(self, kind: int, key: bytes, value: bytes) -> None:
        if not self._status.usable or self._commits.busy:
            self._check()
        self._mem.apply(kind, key, value, self._merge)  # may raise in merge: before the WAL
        with self._status.poison_on_error():
            if self._archiving and self.options.wall_clock is not None:
                now = self.options.wall_clock()
                if now != self._last_mark:  # when this write was made, for a point-in-time restore
                    self._wal.append(encode_time_mark(now))
                    self._last_mark = now
            self._wal.append(encode_op(kind, key, value))
        if self._mem.approx_bytes >= self.options.memtable_bytes:
            self._seal()
            if len(self._tree.sealed) > self.options.max_sealed_memtables:
                self._stall()

    def _seal(self) -> None:
        """Freeze the memtable for a flush job; later writes go to a new memtable and a new WAL."""
        self._wal = self._tree.seal(self._mem, self._wal)
        self._mem = Memtable()
        self._last_mark = None  # each WAL starts with a mark: a restore may read it alone

    def _stall(self) -> None:
        """Backpressure: flush the oldest sealed memtable in this write (a flush job of it still
        running is discarded at its finish), then a due compaction if none is in flight."""
        self.write_stalls += 1
        _run_inline(self._tree.flush_job())
        if self.options.auto_compact and self._tree.compacting is None:
            self.maybe_compact()

    # ---- group commit ------------------------------------------------------------------------

    def begin_sync(self) -> Callable[[], None] | None:
        """A function that makes every write made so far durable when it returns (any thread may
        run it, once); None if no write waits for an fsync. Under `none` it only hands the bytes
        to the OS, here. If it raises, those writes are not durable and the engine is poisoned."""
        self._check()
        return self._begin_sync()

    def _begin_sync(self) -> Callable[[], None] | None:
        with self._status.poison_on_error():
            fsync = self._commits.begin([*(s.wal for s in self._tree.sealed), self._wal])
        return fsync

    def sync(self) -> None:
        """Group commit, blocking: every write so far is durable when this returns."""
        self._check()
        fsync = self._begin_sync()
        if fsync is not None:
            with self._status.poison_on_error():
                fsync()

    # ---- background jobs and blocking maintenance --------------------------------------------

    def background_job(self) -> BackgroundJob | None:
        """The next due flush (first) or compaction, its inputs handed over; None if nothing is
        due. At most one job of each kind is in flight: a flush may run beside a compaction."""
        self._check()
        return self._tree.next_job()

    def full_compaction_job(self) -> BackgroundJob | None:
        """A compaction of every table into one, handed out as `background_job` does (a forced full
        compaction off the owner thread); None if no table exists or a compaction is in flight."""
        self._check()
        return self._tree.full_compaction_job()

    def flush(self) -> str | None:
        """Seal the memtable and flush every sealed memtable, oldest first (a flush job still
        running is discarded at its finish); returns the newest table written, if any."""
        self._check()
        if len(self._mem):
            self._seal()
        newest = None
        while self._tree.sealed:
            newest = _run_inline(self._tree.flush_job()).table or newest
        return newest

    @property
    def needs_compaction(self) -> bool:
        return self._tree.due_compaction() is not None

    def maybe_compact(self) -> CompactionReport | None:
        """Run one compaction now if a tier is due. A corrupt input is quarantined instead (and
        shows in `stats()`); then this returns None."""
        self._check()
        span = self._tree.due_compaction()
        return None if span is None else _run_inline(self._tree.compaction_job(span)).compaction

    def compact(self, full: bool = False) -> list[CompactionReport]:
        """Compact every due tier now; `full=True` merges all tables into one (drops deletions)."""
        self._check()
        if full:
            tables = len(self._tree.version.tables)
            report = _run_inline(self._tree.compaction_job(range(tables))).compaction if tables else None
            return [] if report is None else [report]
        done = []
        while (span := self._tree.due_compaction()) is not None:
            report = _run_inline(self._tree.compaction_job(span)).compaction  # or a quarantine
            if report is not None:
                done.append(report)
        return done

    # ---- reads -------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The key's value, or None if it was never written or is deleted."""
        entry: tuple[int, bytes | None] | None = self._mem.data.get(key)  # Memtable.get, inlined
        if not self._status.usable or self._commits.tickets:
            self._check()
        if entry is not None and entry[0] != MERGE:
            return entry[1]
        while True:
            try:
                tree = self._tree
                return reads.lookup(key, entry, tree.sealed, tree.version.newest_first, self._merge)
            except CorruptTableError as e:
                if not self._tree.quarantine(e):
                    raise
                # then look again without that table

    def scan(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) for start ≤ key < end in key order, merged across memtables and tables.

        The live memtable range is copied when the scan starts; sealed memtables and tables are
        immutable, so a flush or compaction during the scan does not disturb it. A corrupt table
        met mid-scan is quarantined and the `CorruptTableError` is raised: scan again.
        """
        self._check()
        runs = reads.scan_runs(self._mem, self._tree.sealed, self._tree.version.newest_first, start, end)
        return self._scan(runs)

    def scan_keys(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[bytes]:
        """The keys `scan(start, end)` would yield, without reading or merging their values."""
        self._check()
        runs = reads.scan_runs(self._mem, self._tree.sealed, self._tree.version.newest_first, start, end)
        return self._quarantining(compaction.live_keys(runs))

    def _scan(self, runs: list[Iterator[compaction.Entry]]) -> Iterator[tuple[bytes, bytes]]:
        for key, _, value in self._quarantining(compaction.merge_runs(runs, self._merge, drop_deletes=True)):
            yield key, value  # type: ignore[misc]

    def _quarantining(self, found: Iterator[_T]) -> Iterator[_T]:
        """`found`, quarantining a corrupt table met on the way (the error still reaches the caller)."""
        try:
            yield from found
        except CorruptTableError as e:
            self._tree.quarantine(e)
            raise

    # ---- snapshots, stats, lifecycle ---------------------------------------------------------

    def snapshot(self, directory: str, copy: bool = False) -> list[str]:
        """Flush, then hard-link (or `copy`) every table into `directory` with a MANIFEST and
        CHECKSUMS; from now on the WALs are archived there too (archive.py). Returns the tables."""
        self.flush()
        names = self._tree.snapshot(directory, copy)
        archive.add_checksums(self.disk, directory, [*names, "MANIFEST"])
        clock = self.options.wall_clock
        # Every write so far is in a table: the live WAL and later ones hold only newer writes.
        first_log = self._tree.live_logs[0]
        archive.start(self.disk, self.directory, directory, first_log, clock() if clock else None)
        self._archiving, self._last_mark = True, None
        return names

    def take_corruptions(self) -> list[Corruption]:
        """The corruptions found since the last call (at open, in reads, scans, compactions)."""
        return self._damage.take()

    @property
    def flushes(self) -> int:
        return self._tree.flushes

    @property
    def compactions(self) -> int:
        return self._tree.compactions

    @property
    def table_names(self) -> list[str]:
        """Live tables, oldest first."""
        return list(self._tree.version.names)

    def stats(self) -> EngineStats:
        tree = self._tree
        sizes = tree.version.sizes()
        wal_bytes = self._wal.size + sum(s.wal.size for s in tree.sealed)
        archives, archived = archive.archive_stats(self.disk, self.directory) if self._archiving else (0, 0)
        self._archiving = archives > 0
        return EngineStats(
            disk_bytes=sum(sizes) + wal_bytes,
            sstables=len(sizes),
            sstable_bytes=sum(sizes),
            compaction_backlog=compaction.backlog(sizes, self.options.tiers),
            wal_bytes=wal_bytes,
            memtable_bytes=self._mem.approx_bytes,
            memtable_keys=len(self._mem),
            sealed_memtables=len(tree.sealed),
            sealed_bytes=sum(s.memtable.approx_bytes for s in tree.sealed),
            flushes=tree.flushes,
            compactions=tree.compactions,
            write_stalls=self.write_stalls,
            jobs_in_flight=(tree.flushing is not None) + (tree.compacting is not None),
            jobs_discarded=tree.jobs_discarded,
            fsyncs=self.disk.fsync_count,
            bytes_written=self.disk.bytes_written,
            block_cache_hits=self._cache.hits,
            block_cache_misses=self._cache.misses,
            quarantined=tuple(f"{q.table}: {q.reason}" for q in tree.quarantined),
            corruptions=dict(self._damage.counts),
            last_recovery=self.recovery.summary,
            archives=archives,
            archived_wal_bytes=archived,
        )

    def close(self) -> None:
        """Sync the WALs and release files. Unflushed writes stay in the WAL for the next open.
        Jobs still running are abandoned: their `finish` will do nothing."""
        if self._status.closed:
            return
        self._collect_syncs()
        usable = self._status.usable
        self._status.closed = True
        try:
            if usable:
                fsync = self._begin_sync()
                if fsync is not None:
                    fsync()
        finally:
            self._wal.close()
            self._tree.close()

    def __enter__(self) -> LSMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
