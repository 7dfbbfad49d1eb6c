"""The tree behind the live memtable: sealed memtables, live tables, file numbers, the MANIFEST,
and how flush and compaction jobs change them.

Owner thread only (engine.py states the ownership rule). `next_job` hands a job its inputs;
`_install_flush` / `_install_compaction` run from the job's `finish` and either install the
result (MANIFEST first, then deleting what it made obsolete) or discard it, when the inputs
changed meanwhile: a memtable flushed inline, an input compacted away or quarantined. A job
finished after the engine was closed or poisoned changes nothing on disk. A table found damaged
(storage/damage.py) is compacted alone before any other compaction: its readable records are
rewritten and the damaged file goes to `quarantine/`, so its damage is reported once.
"""

from __future__ import annotations

from typing import NoReturn

from bhandar_cli.storage import archive, compaction, manifest, recovery
from bhandar_cli.storage.blocks import BlockCache
from bhandar_cli.storage.damage import DamageLog
from bhandar_cli.storage.disk import Disk, join
from bhandar_cli.storage.engine_options import EngineOptions
from bhandar_cli.storage.jobs import COMPACTION, FLUSH, BackgroundJob, CompactionJob, FlushJob, TableOutput
from bhandar_cli.storage.manifest import Manifest, file_name, file_number
from bhandar_cli.storage.memtable import Memtable, SealedMemtable
from bhandar_cli.storage.record_kinds import Merge, encode_log_link
from bhandar_cli.storage.recovery import Recovered
from bhandar_cli.storage.reports import CompactionReport, JobReport, Quarantined
from bhandar_cli.storage.status import EngineStatus
from bhandar_cli.storage.storage_errors import CorruptTableError
from bhandar_cli.storage.table_writer import TableWriter
from bhandar_cli.storage.version import Version
from bhandar_cli.storage.wal import WALWriter


class Tree:
    def __init__(
        self,
        disk: Disk,
        directory: str,
        options: EngineOptions,
        cache: BlockCache,
        merge: Merge | None,
        status: EngineStatus,
        recovered: Recovered,
        damage: DamageLog,
    ) -> None:
        self.disk, self.directory, self.options = disk, directory, options
        self._cache, self._merge, self._status, self._damage = cache, merge, status, damage
        self.version = Version(tuple(recovered.tables), tuple(recovered.names))
        self.sealed: list[SealedMemtable] = []  # oldest first
        self.quarantined: list[Quarantined] = list(recovered.quarantined)
        self._next_file, self._log_number = recovered.next_file, recovered.manifest.log_number
        self._generation = recovered.manifest.generation
        self._plain = set(recovered.plain)  # plain files of before encryption, still read
        unsealed = options.cipher is not None and not recovered.manifest.sealed
        if recovered.manifest.tables != tuple(recovered.names) or not recovered.had_manifest or unsealed:
            self.store_manifest()
        # WAL numbers of the live memtable: replay resumes appending after the last good record.
        self.live_logs = recovered.logs or [self.alloc()]
        self.flushing: FlushJob | None = None  # background jobs handed out, not finished
        self.compacting: CompactionJob | None = None
        self.flushes = self.compactions = self.jobs_discarded = 0
        self._tier_due: tuple[Version | None, range | None] = (None, None)  # (of this version, due)

    # ---- files -------------------------------------------------------------------------------

    def alloc(self) -> int:
        self._next_file += 1
        return self._next_file - 1

    def log_path(self, number: int) -> str:
        return join(self.directory, file_name(number, "log"))

    def store_manifest(self) -> None:
        self._generation += 1
        m = self._manifest(self._log_number)
        manifest.store(self.disk, self.directory, m, self.options.cipher)

    def _manifest(self, log_number: int) -> Manifest:
        """The MANIFEST of the tables live now; sealed (its generation, the plain files of before
        encryption still live) when the engine encrypts."""
        names = self.version.names
        self._plain = {p for p in self._plain if p in names or _log_at_least(p, self._log_number)}
        sealed = self.options.cipher is not None
        return Manifest(
            self._next_file, log_number, names, self._generation, tuple(sorted(self._plain)), sealed
        )

    def snapshot(self, directory: str, copy: bool = False) -> list[str]:
        """Hard-link (or `copy`) every live table into `directory` (new or empty), then its MANIFEST."""
        if self.disk.listdir(directory):
            raise ValueError(f"snapshot directory {directory} is not empty")
        self.disk.makedirs(directory)
        version = self.version
        for table, name in zip(version.tables, version.names, strict=True):
            archive.place(self.disk, table.path, join(directory, name), copy)
        # Written last: a snapshot cut short by a crash has no MANIFEST and refuses to open.
        # No GENERATION there: a snapshot is an older state on purpose.
        m = self._manifest(self._next_file)
        manifest.store(self.disk, directory, m, self.options.cipher, witness=False)
        return list(version.names)

    # ---- sealing -----------------------------------------------------------------------------

    def seal(self, memtable: Memtable, wal: WALWriter) -> WALWriter:
        """Queue a full memtable (written to `wal`) for its flush; returns the next memtable's WAL."""
        with self._status.poison_on_error():
            log = self.alloc()
            new_wal = WALWriter(self.disk, self.log_path(log), self.options.fsync, self.options.cipher)
            new_wal.append(encode_log_link(self.live_logs[-1], wal.size))
        self.sealed.append(SealedMemtable(memtable, tuple(self.live_logs), wal))
        self.live_logs = [log]
        return new_wal

    # ---- jobs --------------------------------------------------------------------------------

    def due_compaction(self) -> range | None:
        """A damaged table alone (to rewrite it without its damage), else the tier due, if any."""
        version = self.version
        for i, table in enumerate(version.tables):
            if table.damaged:
                return range(i, i + 1)
        # Asked after every step of a node (is a job due?): the tiers change only with the version.
        if self._tier_due[0] is not version:
            self._tier_due = (version, compaction.pick(version.sizes(), self.options.tiers))
        return self._tier_due[1]

    def next_job(self) -> BackgroundJob | None:
        """A flush first, then a due compaction; at most one of each kind in flight."""
        if self.flushing is None and self.sealed:
            self.flushing = self.flush_job()
            return self.flushing
        if self.compacting is None and self.options.auto_compact:
            span = self.due_compaction()
            if span is not None:
                self.compacting = self.compaction_job(span)
                return self.compacting
        return None

    def full_compaction_job(self) -> CompactionJob | None:
        """Every table into one, as the compaction in flight; None if one is, or no table exists."""
        if self.compacting is not None or not self.version.tables:
            return None
        self.compacting = self.compaction_job(range(len(self.version.tables)))
        return self.compacting

    def _output(self) -> TableOutput:
        """Create the next table file (so no reopen can hand its number out again)."""
        o = self.options
        with self._status.poison_on_error():
            number = self.alloc()
            name = file_name(number, "sst")
            path = join(self.directory, name)
            writer = TableWriter(
                self.disk,
                path,
                block_bytes=o.block_bytes,
                bits_per_key=o.bloom_bits_per_key,
                hashes=o.bloom_hashes,
                cipher=o.cipher,
            )
        return TableOutput(self.disk, path, name, writer, self._cache)

    def flush_job(self) -> FlushJob:
        """The flush of the oldest sealed memtable."""
        return FlushJob(
            self.sealed[0],
            self._output(),
            drop_deletes=not self.version.tables,
            merge=self._merge,
            install=self._install_flush,
        )

    def compaction_job(self, span: range) -> CompactionJob:
        return CompactionJob(
            self.version.tables[span.start : span.stop],
            self._output(),
            drop_deletes=span.start == 0,  # nothing older exists, so deletions shadow nothing
            merge=self._merge,
            install=self._install_compaction,
        )

    # ---- installing --------------------------------------------------------------------------

    def _unusable(self, kind: str, output: TableOutput) -> JobReport | None:
        """The report of a job finished after close or poisoning: it changes nothing on disk."""
        if self._status.usable:
            return None
        output.release()
        reason = "the engine was closed" if self._status.closed else "the engine failed"
        return JobReport(kind, False, None, reason)

    def _discard(self, kind: str, output: TableOutput, reason: str) -> JobReport:
        with self._status.poison_on_error():
            output.discard()
        self.jobs_discarded += 1
        return JobReport(kind, False, None, reason)

    def _fail(self, error: Exception) -> NoReturn:
        self._status.poison(error)
        raise error

    def _install_flush(self, job: FlushJob) -> JobReport:
        if self.flushing is job:
            self.flushing = None
        if (report := self._unusable(FLUSH, job.output)) is not None:
            return report
        if job.error is not None:
            self._fail(job.error)
        if not self.sealed or self.sealed[0] is not job.sealed:
            return self._discard(FLUSH, job.output, "its memtable was flushed meanwhile")
        table, name = job.output.table, job.output.name
        with self._status.poison_on_error():
            if table is not None:
                table.report_to(self._damage)
                self.version = self.version.with_newest(table, name)
            self.sealed.pop(0)
            self._log_number = self.sealed[0].logs[0] if self.sealed else self.live_logs[0]
            self.store_manifest()
            job.sealed.wal.close()
            limit = self.options.archive_bytes
            for log in job.sealed.logs:  # a snapshot may keep them (archive.py)
                archive.retire_log(self.disk, self.directory, file_name(log, "log"), limit)
        self.flushes += 1
        return JobReport(FLUSH, True, None if table is None else name)

    def _install_compaction(self, job: CompactionJob) -> JobReport:
        if self.compacting is job:
            self.compacting = None
        if (report := self._unusable(COMPACTION, job.output)) is not None:
            return report
        for corruption in job.damage:
            self._damage.add(corruption)
        if isinstance(job.error, CorruptTableError):
            self.quarantine(job.error)
            return self._discard(COMPACTION, job.output, f"an input was corrupt: {job.error.what}")
        if job.error is not None:
            self._fail(job.error)
        span = self.version.span_of(job.inputs)
        if span is None:
            return self._discard(COMPACTION, job.output, "its inputs were compacted or quarantined meanwhile")
        table, name = job.output.table, job.output.name
        old_names = self.version.names[span.start : span.stop]
        damaged = {c.file for c in job.damage}
        with self._status.poison_on_error():
            if table is not None:
                table.report_to(self._damage)
            self.version = self.version.replaced(span, table, name)
            self.store_manifest()
            # Inputs are not closed: a running scan may still read them (POSIX keeps removed files
            # readable while open); their handles close when the last reference goes.
            for t, old in zip(job.inputs, old_names, strict=True):
                t.uncache()
                if t.damaged or t.path in damaged:  # kept for inspection
                    why = "damaged; its readable records were rewritten"
                    self.quarantined.append(recovery.move_to_quarantine(self.disk, self.directory, old, why))
                else:
                    self.disk.remove(t.path)
        self.compactions += 1
        figures = CompactionReport(
            tuple(old_names),
            None if table is None else name,
            sum(t.records for t in job.inputs),
            0 if table is None else table.records,
            sum(t.size for t in job.inputs),
            0 if table is None else table.size,
            job.drop_deletes,
        )
        return JobReport(COMPACTION, True, figures.output, compaction=figures)

    def quarantine(self, error: CorruptTableError) -> bool:
        """Take a live table out of service; False if it is no longer live (nothing to do)."""
        name = error.path.rsplit("/", 1)[-1]
        version = self.version.without(name)
        if version is None:
            return False  # already quarantined, or replaced by a compaction meanwhile
        self._damage.add(recovery.table_lost(error.path, self.disk.size(error.path), error.what))
        self.version.tables[self.version.names.index(name)].uncache()
        with self._status.poison_on_error():
            self.version = version
            self.store_manifest()
            self.quarantined.append(recovery.move_to_quarantine(self.disk, self.directory, name, error.what))
        return True

    def close(self) -> None:
        """Release the sealed memtables' WALs and the tables' files (jobs in flight are abandoned)."""
        for s in self.sealed:
            s.wal.close()
        for t in self.version.tables:
            t.close()


def _log_at_least(name: str, number: int) -> bool:
    """Whether `name` is a WAL numbered `number` or later (one that still matters)."""
    parsed = file_number(name)
    return parsed is not None and parsed[1] == "log" and parsed[0] >= number
