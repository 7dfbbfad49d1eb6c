"""The LSM engine of one node: WAL → memtable → SSTables, with size-tiered compaction.

Directory layout: `MANIFEST` (live tables, see manifest.py), `NNNNNN.log` (WAL files),
`NNNNNN.sst` (tables), `quarantine/` (tables that failed a checksum, kept for inspection).

Crash safety, step by step (a crash can stop any line; the Disk contract says what survives):
- write: apply to the memtable (a failing merge rejects the write before it is logged), append
  to the WAL. Acknowledge only after `sync()` (policy `batch`) or after `put` returned (`always`).
  A failed append or fsync poisons the engine: it refuses every call until reopened.
- flush: write the table and fsync it → create the next WAL → rewrite MANIFEST atomically (new
  table listed, `log_number` = the new WAL) → delete older WALs. Before the MANIFEST rename the new
  table is an orphan (deleted at open) and the old WAL is replayed; after it, the old WAL is
  obsolete. A table is never listed before it is durable, so a half-written one is never served.
- compaction: write the merged table and fsync it → MANIFEST swaps the inputs for it → delete the
  inputs. Before the rename the output is an orphan; after it the inputs are.
- open: delete `*.tmp` and orphans, open (and by default verify) every listed table, replay WALs
  numbered ≥ `log_number` in order, truncating a torn tail, and keep appending to the newest.

Corruption policy: a table that fails a check is moved to `quarantine/`, dropped from the
MANIFEST and reported (`stats().quarantined`, `recovery`); the engine keeps serving the other
tables. The keys it held may read as older or missing until the store's anti-entropy repairs
them from other replicas; serving a damaged table could instead return garbage as data.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from bhandar_cli.storage import compaction, manifest, recovery
from bhandar_cli.storage.bloom import bloom_hash
from bhandar_cli.storage.disk import Disk, join
from bhandar_cli.storage.errors import CorruptTableError, EngineClosedError, EngineFailedError
from bhandar_cli.storage.manifest import Manifest, file_name
from bhandar_cli.storage.memtable import Memtable
from bhandar_cli.storage.records import DELETE, MERGE, VALUE, Merge, encode_op
from bhandar_cli.storage.recovery import restore_snapshot
from bhandar_cli.storage.reports import CompactionReport, EngineStats, Quarantined, RecoveryReport
from bhandar_cli.storage.sstable import DEFAULT_BLOCK_BYTES, BlockCache, Table, TableWriter
from bhandar_cli.storage.wal import FsyncPolicy, WALWriter

__all__ = [
    "CompactionReport",
    "EngineOptions",
    "EngineStats",
    "LSMEngine",
    "Quarantined",
    "RecoveryReport",
    "restore_snapshot",
]


@dataclass(frozen=True)
class EngineOptions:
    fsync: FsyncPolicy = FsyncPolicy.BATCH
    memtable_bytes: int = 4 << 20  # flush threshold
    block_bytes: int = DEFAULT_BLOCK_BYTES
    bloom_bits_per_key: int = 10
    bloom_hashes: int = 7
    tiers: compaction.TierPolicy = field(default_factory=compaction.TierPolicy)
    auto_compact: bool = True  # run due compactions right after a flush
    block_cache_bytes: int = 16 << 20
    verify_on_open: bool = True  # check every block's CRC when a table is opened

    def __post_init__(self) -> None:
        object.__setattr__(self, "fsync", FsyncPolicy(self.fsync))  # accept "batch" as well
        for name in ("memtable_bytes", "block_bytes", "bloom_bits_per_key", "bloom_hashes"):
            if getattr(self, name) < 1:
                raise ValueError(f"EngineOptions.{name} must be positive, got {getattr(self, name)}")


class LSMEngine:
    """A crash-safe sorted key-value store over a `Disk`. Keys and values are `bytes`.

    `merge(newer, older)`, if given, must be associative; every put is then a merge operand and
    reads fold a key's records newest to oldest (stopping at a deletion). Without it, newest wins.
    """

    def __init__(
        self, disk: Disk, directory: str, options: EngineOptions | None = None, merge: Merge | None = None
    ) -> None:
        self.disk, self.directory = disk, directory
        self.options = opts = options or EngineOptions()
        self._merge = merge
        self._put_kind = VALUE if merge is None else MERGE
        self._cache = BlockCache(opts.block_cache_bytes)
        self._mem = Memtable()
        self._tables: list[Table] = []  # oldest first
        self._newest_first: list[Table] = []
        self._names: list[str] = []
        self._quarantined: list[Quarantined] = []
        self._failed: str | None = None
        self._closed = False
        self.flushes = self.compactions = 0
        self.recovery = self._open()

    # ---- open and recovery -------------------------------------------------------------------

    def _open(self) -> RecoveryReport:
        r = recovery.recover(
            self.disk, self.directory, self._cache, verify=self.options.verify_on_open, merge=self._merge
        )
        self._next_file, self._log_number = r.next_file, r.manifest.log_number
        self._mem, self._quarantined = r.memtable, list(r.quarantined)
        self._set_tables(r.tables, r.names)
        if r.manifest.tables != tuple(r.names) or not r.had_manifest:
            self._store_manifest()
        log = r.logs[-1] if r.logs else self._alloc()  # keep appending after the last good record
        self._wal = WALWriter(self.disk, join(self.directory, file_name(log, "log")), self.options.fsync)
        self._live_logs = r.logs or [log]
        if self._mem.approx_bytes >= self.options.memtable_bytes:
            self.flush()
        return RecoveryReport(
            self.directory, len(r.tables), tuple(r.wal_reports), tuple(r.orphans), tuple(r.quarantined)
        )

    # ---- writes ------------------------------------------------------------------------------

    def _check(self) -> None:
        if self._closed:
            raise EngineClosedError(f"storage engine at {self.directory} is closed")
        if self._failed is not None:
            raise EngineFailedError(
                f"storage engine at {self.directory} failed ({self._failed}); "
                "reopen it to recover from its WAL"
            )

    def _poison(self, e: BaseException) -> None:
        # After a failed write or fsync the memory and the files may disagree (an fsync error may
        # even have dropped dirty pages: PostgreSQL's "fsyncgate"), so only a reopen is safe.
        self._failed = f"{type(e).__name__}: {e}"

    def put(self, key: bytes, value: bytes) -> None:
        """Write `value` (or merge it into the key's value). Durable after `sync()` under `batch`."""
        if type(key) is not bytes or type(value) is not bytes:
            raise TypeError(f"keys and values are bytes, got {type(key).__name__} and {type(value).__name__}")
        self._write(self._put_kind, key, value)

    def delete(self, key: bytes) -> None:
        """Write a deletion marker that hides every older value of `key`."""
        if type(key) is not bytes:
            raise TypeError(f"keys are bytes, got {type(key).__name__}")
        self._write(DELETE, key, b"")

    def _write(self, kind: int, key: bytes, value: bytes) -> None:
        if self._closed or self._failed is not None:
            self._check()
        self._mem.apply(kind, key, value, self._merge)  # may raise in merge: before the WAL
        try:
            self._wal.append(encode_op(kind, key, value))
        except BaseException as e:
            self._poison(e)
            raise
        if self._mem.approx_bytes >= self.options.memtable_bytes:
            self.flush()
            if self.options.auto_compact:
                # A corrupt input does not fail the write: it is quarantined and shown in stats().
                with contextlib.suppress(CorruptTableError):
                    self.maybe_compact()

    def sync(self) -> None:
        """Group commit: every write so far is durable when this returns (not under `none`)."""
        self._check()
        try:
            self._wal.sync()
        except BaseException as e:
            self._poison(e)
            raise

    def flush(self) -> str | None:
        """Write the memtable to a new SSTable and rotate the WAL; returns the table's name."""
        self._check()
        if not len(self._mem):
            return None
        try:
            number, log = self._alloc(), self._alloc()
            entries = self._mem.items()
            if not self._tables:  # nothing older: deletions can go, merge operands become values
                entries = compaction.merge_runs([entries], self._merge, drop_deletes=True)
            table = self._write_table(number, entries)
            new_wal = WALWriter(self.disk, join(self.directory, file_name(log, "log")), self.options.fsync)
            tables, names = self._tables[:], self._names[:]
            if table is not None:
                tables.append(table)
                names.append(file_name(number, "sst"))
            self._set_tables(tables, names)
            self._log_number = log
            self._store_manifest()
            self._wal.close()
            self._wal = new_wal
            for old in self._live_logs:
                self.disk.remove(join(self.directory, file_name(old, "log")))
            self._live_logs = [log]
            self._mem = Memtable()
        except BaseException as e:
            self._poison(e)
            raise
        self.flushes += 1
        return None if table is None else file_name(number, "sst")

    def _write_table(self, number: int, entries: Iterator[compaction.Entry]) -> Table | None:
        path = join(self.directory, file_name(number, "sst"))
        o = self.options
        writer = TableWriter(
            self.disk,
            path,
            block_bytes=o.block_bytes,
            bits_per_key=o.bloom_bits_per_key,
            hashes=o.bloom_hashes,
        )
        try:
            writer.add_all(entries)
        except CorruptTableError:  # an input failed its checksum: drop the partial output
            writer.abort()
            self.disk.remove(path)
            raise
        if not writer.records:
            writer.abort()
            self.disk.remove(path)
            return None
        writer.finish()
        return Table(self.disk, path, self._cache, verify=False)

    def _alloc(self) -> int:
        self._next_file += 1
        return self._next_file - 1

    def _set_tables(self, tables: list[Table], names: list[str]) -> None:
        self._tables, self._names = tables, names
        self._newest_first = tables[::-1]

    def _store_manifest(self) -> None:
        manifest.store(
            self.disk, self.directory, Manifest(self._next_file, self._log_number, tuple(self._names))
        )

    # ---- compaction --------------------------------------------------------------------------

    def _sizes(self) -> list[int]:
        return [t.size for t in self._tables]

    @property
    def needs_compaction(self) -> bool:
        return compaction.pick(self._sizes(), self.options.tiers) is not None

    def maybe_compact(self) -> CompactionReport | None:
        """Run one compaction if a tier is due."""
        self._check()
        chosen = compaction.pick(self._sizes(), self.options.tiers)
        return None if chosen is None else self._compact(chosen)

    def compact(self, full: bool = False) -> list[CompactionReport]:
        """Compact every due tier now; `full=True` merges all tables into one (drops deletions)."""
        self._check()
        if full:
            return [self._compact(range(len(self._tables)))] if self._tables else []
        done = []
        while (report := self.maybe_compact()) is not None:
            done.append(report)
        return done

    def _compact(self, chosen: range) -> CompactionReport:
        inputs = self._tables[chosen.start : chosen.stop]
        drop = chosen.start == 0  # nothing older exists, so deletions have nothing to shadow
        try:
            number = self._alloc()
            runs = [t.entries() for t in reversed(inputs)]
            table = self._write_table(number, compaction.merge_runs(runs, self._merge, drop_deletes=drop))
            out = [] if table is None else [table]
            out_names = [] if table is None else [file_name(number, "sst")]
            old_names = self._names[chosen.start : chosen.stop]
            tables = self._tables[: chosen.start] + out + self._tables[chosen.stop :]
            self._set_tables(tables, self._names[: chosen.start] + out_names + self._names[chosen.stop :])
            self._store_manifest()
            # Inputs are not closed: a running scan may still read them (POSIX keeps removed files
            # readable while open); their handles close when the last reference goes.
            for t in inputs:
                self.disk.remove(t.path)
        except CorruptTableError as e:
            self._quarantine_live(e)
            raise
        except BaseException as e:
            self._poison(e)
            raise
        self.compactions += 1
        return CompactionReport(
            tuple(old_names),
            out_names[0] if out_names else None,
            sum(t.records for t in inputs),
            0 if table is None else table.records,
            sum(t.size for t in inputs),
            0 if table is None else table.size,
            drop,
        )

    # ---- reads -------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The key's value, or None if it was never written or is deleted."""
        entry = self._mem.data.get(key)
        if entry is not None and entry[0] != MERGE and not self._closed and self._failed is None:
            return entry[1]
        self._check()
        while True:
            try:
                return self._lookup(key, entry)
            except CorruptTableError as e:
                if not self._quarantine_live(e):
                    raise
                # then look again without that table

    def _lookup(self, key: bytes, entry: tuple[int, bytes | None] | None) -> bytes | None:
        merge = self._merge
        acc = None if entry is None else entry[1]
        h = bloom_hash(key)
        for table in self._newest_first:
            if not table.bloom.may_contain_hash(h):
                continue
            record = table.get(key)
            if record is None:
                continue
            kind, value = record
            if kind == DELETE:
                return acc
            if acc is None:
                acc = value
            elif merge is None:  # MERGE records from a run with a merge function; newest wins
                return acc
            else:
                acc = merge(acc, value)  # type: ignore[arg-type]
            if kind == VALUE:
                return acc
        return acc

    def scan(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) for start ≤ key < end in key order, merged across the memtable and tables.

        The memtable range is copied when the scan starts; tables are immutable, so a flush or
        compaction during the scan does not disturb it. A corrupt table met mid-scan is
        quarantined and the `CorruptTableError` is raised: the caller should scan again.
        """
        self._check()
        runs = [list(self._mem.items(start, end)), *(t.entries(start, end) for t in self._newest_first)]
        return self._scan(runs)

    def _scan(self, runs: list) -> Iterator[tuple[bytes, bytes]]:
        try:
            for key, _, value in compaction.merge_runs(runs, self._merge, drop_deletes=True):
                yield key, value  # type: ignore[misc]
        except CorruptTableError as e:
            self._quarantine_live(e)
            raise

    def _quarantine_live(self, error: CorruptTableError) -> bool:
        """Take a live table out of service; False if it is no longer live (nothing to do)."""
        name = error.path.rsplit("/", 1)[-1]
        if name not in self._names:
            return False  # already quarantined, or replaced by a compaction meanwhile
        i = self._names.index(name)
        try:
            self._set_tables(self._tables[:i] + self._tables[i + 1 :], self._names[:i] + self._names[i + 1 :])
            self._store_manifest()
            self._quarantined.append(recovery.move_to_quarantine(self.disk, self.directory, name, error.what))
        except BaseException as e:
            self._poison(e)
            raise
        return True

    # ---- snapshots, stats, lifecycle ---------------------------------------------------------

    def snapshot(self, directory: str) -> list[str]:
        """Flush, then hard-link every table into `directory` (new or empty) with a MANIFEST, so
        `LSMEngine(disk, directory)` opens the snapshot. Returns the linked table names."""
        self.flush()
        if self.disk.listdir(directory):
            raise ValueError(f"snapshot directory {directory} is not empty")
        self.disk.makedirs(directory)
        for table, name in zip(self._tables, self._names, strict=True):
            self.disk.link(table.path, join(directory, name))
        # Written last: a snapshot cut short by a crash has no MANIFEST and refuses to open.
        manifest.store(self.disk, directory, Manifest(self._next_file, self._next_file, tuple(self._names)))
        return list(self._names)

    def stats(self) -> EngineStats:
        sizes = self._sizes()
        return EngineStats(
            disk_bytes=sum(sizes) + self._wal.size,
            sstables=len(sizes),
            sstable_bytes=sum(sizes),
            compaction_backlog=compaction.backlog(sizes, self.options.tiers),
            wal_bytes=self._wal.size,
            memtable_bytes=self._mem.approx_bytes,
            memtable_keys=len(self._mem),
            flushes=self.flushes,
            compactions=self.compactions,
            fsyncs=self.disk.fsync_count,
            bytes_written=self.disk.bytes_written,
            block_cache_hits=self._cache.hits,
            block_cache_misses=self._cache.misses,
            quarantined=tuple(f"{q.table}: {q.reason}" for q in self._quarantined),
            last_recovery=self.recovery.summary,
        )

    @property
    def table_names(self) -> list[str]:
        """Live tables, oldest first."""
        return list(self._names)

    def close(self) -> None:
        """Sync the WAL and release files. Unflushed writes stay in the WAL for the next open."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._failed is None:
                self._wal.sync()
        finally:
            self._wal.close()
            for t in self._tables:
                t.close()

    def __enter__(self) -> LSMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
