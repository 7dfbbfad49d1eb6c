"""Background jobs: a flush or a compaction built by a worker thread, installed by the owner.

A job is handed out by `LSMEngine.background_job()` on the owner thread, already holding all it
needs, none of which anybody changes any more: a sealed memtable or the (immutable) tables to
merge, the merge function (pure), and its output file, created by the owner so that its number is
taken on disk before any reopen could hand the number out again. The driver then calls

    job.run()      # on a worker thread: writes, fsyncs and opens the output table
    job.finish()   # back on the owner thread: installs it and returns a `JobReport`

`run` touches only the job's own fields and its output file: it has no way to reach the engine.
It never raises; what went wrong is kept for `finish`, which the driver must always call. A bad
block of an input is skipped (its records are lost from the output) and kept in `damage`, for
`finish` to report.
`finish` hands the job to the engine's install routine (the `install` collaborator), which
decides there, on the owner thread, whether the result still fits the engine's current state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Protocol

from bhandar_cli.storage.blocks import BlockCache
from bhandar_cli.storage.compaction import Entry, merge_runs
from bhandar_cli.storage.damage import Corruption, DamageLog
from bhandar_cli.storage.disk import Disk
from bhandar_cli.storage.memtable import SealedMemtable
from bhandar_cli.storage.record_kinds import Merge
from bhandar_cli.storage.reports import JobReport
from bhandar_cli.storage.sstable import Table
from bhandar_cli.storage.storage_errors import CorruptTableError
from bhandar_cli.storage.table_writer import TableWriter

FLUSH, COMPACTION = "flush", "compaction"


class BackgroundJob(Protocol):
    kind: str  # "flush" | "compaction"

    @property
    def error(self) -> Exception | None:
        """What `run` met, if anything: read after `run` (a simulator checks it for its crashes)."""
        ...

    def run(self) -> None:
        """Worker thread: build the output file (never raises; see `finish`)."""
        ...

    def finish(self) -> JobReport:
        """Owner thread: install the output (or discard it) and say what happened. A no-op if the
        engine was closed meanwhile. Raises the error `run` met if it was an I/O failure (the
        engine is then poisoned, as after a failed write)."""
        ...


class TableOutput:
    """The table a job writes. The owner creates the file; the worker fills, fsyncs and opens it."""

    def __init__(self, disk: Disk, path: str, name: str, writer: TableWriter, cache: BlockCache) -> None:
        self.disk, self.path, self.name = disk, path, name
        self._writer, self._cache = writer, cache
        self.table: Table | None = None  # None until built, and when every record was dropped
        self.removed = False  # the worker already deleted the file (empty, or a corrupt input)

    def build(self, entries: Iterable[Entry]) -> None:
        """Worker thread: write `entries` (sorted, unique keys), fsync, open the table for reads."""
        writer = self._writer
        try:
            writer.add_all(entries)
        except CorruptTableError:  # an input failed its checksum: the partial output is garbage
            writer.abort()
            self.disk.remove(self.path)
            self.removed = True
            raise
        except BaseException:
            # An I/O failure: do no more I/O here; the unlisted file is an orphan for the next open.
            with contextlib.suppress(Exception):
                writer.abort()
            raise
        if not writer.records:
            writer.abort()
            self.disk.remove(self.path)
            self.removed = True
            return
        writer.finish()
        # Opening reads only the new file; the table uses the shared block cache (and reports to
        # the engine's damage log) once the owner reads through it, after the install.
        self.table = Table(
            self.disk, self.path, self._cache, verify=False, damage_log=DamageLog(), cipher=writer.cipher
        )

    def release(self) -> None:
        """Owner thread: let go of the output without touching the disk (the engine is closed)."""
        if self.table is not None:
            self.table.close()

    def discard(self) -> None:
        """Owner thread: the output will never be installed; delete it now rather than at open."""
        self.release()
        if not self.removed and self.disk.exists(self.path):
            self.disk.remove(self.path)
            self.removed = True


class _Steps:
    """run once, then finish once: the order the driver promises, checked; and `run`'s error."""

    def __init__(self) -> None:
        self.error: Exception | None = None
        self._ran = self._finished = False

    def run(self, build: Callable[[], None]) -> None:
        if self._ran:
            raise RuntimeError("a background job runs once (a driver bug)")
        self._ran = True
        try:
            build()
        except Exception as e:  # kept for finish, on the owner thread
            self.error = e

    def finishing(self) -> None:
        if not self._ran or self._finished:
            raise RuntimeError("finish() comes once, after run() (a driver bug)")
        self._finished = True


class FlushJob:
    """Write the oldest sealed memtable to a table."""

    kind = FLUSH

    def __init__(
        self,
        sealed: SealedMemtable,
        output: TableOutput,
        *,
        drop_deletes: bool,  # nothing older exists: deletions can go, merge operands become values
        merge: Merge | None,
        install: Callable[[FlushJob], JobReport],
    ) -> None:
        self.sealed, self.output = sealed, output
        self.drop_deletes, self._merge = drop_deletes, merge
        self._install = install
        self._steps = _Steps()

    @property
    def error(self) -> Exception | None:
        """What went wrong in `run`, if anything (read it on the owner thread, after `run`)."""
        return self._steps.error

    def run(self) -> None:
        self._steps.run(self._build)

    def _build(self) -> None:
        entries: Iterable[Entry] = self.sealed.memtable.items()
        if self.drop_deletes:
            entries = merge_runs([entries], self._merge, drop_deletes=True)
        self.output.build(entries)

    def finish(self) -> JobReport:
        self._steps.finishing()
        return self._install(self)


class CompactionJob:
    """Merge a contiguous run of tables into one."""

    kind = COMPACTION

    def __init__(
        self,
        inputs: tuple[Table, ...],  # oldest first
        output: TableOutput,
        *,
        drop_deletes: bool,  # the run includes the oldest table
        merge: Merge | None,
        install: Callable[[CompactionJob], JobReport],
    ) -> None:
        self.inputs, self.output = inputs, output
        self.drop_deletes, self._merge = drop_deletes, merge
        self._install = install
        self._steps = _Steps()
        self.damage: list[Corruption] = []  # bad input blocks skipped (read on the owner, after run)

    @property
    def error(self) -> Exception | None:
        """What went wrong in `run`, if anything (read it on the owner thread, after `run`)."""
        return self._steps.error

    def run(self) -> None:
        self._steps.run(self._build)

    def _build(self) -> None:
        # Uncached reads: the block cache (and the damage log) belong to the owner thread.
        runs = [t.entries(cached=False, on_damage=self.damage.append) for t in reversed(self.inputs)]
        self.output.build(merge_runs(runs, self._merge, drop_deletes=self.drop_deletes))

    def finish(self) -> JobReport:
        self._steps.finishing()
        return self._install(self)
