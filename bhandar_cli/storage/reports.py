"""Plain records the engine hands out: recovery, compaction and job reports, quarantine notes, stats."""

from __future__ import annotations

from dataclasses import dataclass

from bhandar_cli.storage.wal import WALReport


@dataclass(frozen=True)
class Quarantined:
    table: str
    reason: str
    moved_to: str | None  # None when the file was missing


@dataclass(frozen=True)
class RecoveryReport:
    directory: str
    tables: int
    wal: tuple[WALReport, ...]
    orphans_removed: tuple[str, ...]
    quarantined: tuple[Quarantined, ...]

    @property
    def records_replayed(self) -> int:
        return sum(r.records for r in self.wal)

    @property
    def bytes_truncated(self) -> int:
        return sum(r.bytes_truncated for r in self.wal)

    @property
    def messages(self) -> list[str]:
        out = [r.message for r in self.wal if r.problem or r.corrupt]
        out += [f"SSTable {q.table} quarantined: {q.reason}" for q in self.quarantined]
        return out

    @property
    def summary(self) -> str:
        head = (
            f"opened {self.directory}: {self.tables} tables, replayed {self.records_replayed} records "
            f"from {len(self.wal)} WAL file(s)"
        )
        return "; ".join([head, *self.messages])


@dataclass(frozen=True)
class CompactionReport:
    inputs: tuple[str, ...]
    output: str | None  # None when every record was a dropped deletion
    records_in: int
    records_out: int
    bytes_in: int
    bytes_out: int
    dropped_deletes: bool


@dataclass(frozen=True)
class JobReport:
    """How a background job ended (`BackgroundJob.finish`)."""

    kind: str  # "flush" | "compaction"
    installed: bool
    table: str | None  # the table it added (None if discarded, or if no record was left to write)
    reason: str = ""  # why it was discarded
    compaction: CompactionReport | None = None  # an installed compaction's figures


@dataclass(frozen=True)
class EngineStats:
    disk_bytes: int
    sstables: int
    sstable_bytes: int
    compaction_backlog: int
    wal_bytes: int
    memtable_bytes: int  # the live memtable
    memtable_keys: int
    sealed_memtables: int  # full memtables waiting for their flush
    sealed_bytes: int
    flushes: int
    compactions: int
    write_stalls: int  # writes that flushed a sealed memtable themselves (too many were waiting)
    jobs_in_flight: int  # background jobs handed out and not finished
    jobs_discarded: int  # finished jobs whose inputs had changed: their output was deleted
    fsyncs: int
    bytes_written: int
    block_cache_hits: int
    block_cache_misses: int
    quarantined: tuple[str, ...]
    corruptions: dict[str, int]  # corruptions found since the open, by kind (storage/damage.py)
    last_recovery: str
    archives: int = 0  # snapshots this store still keeps its WALs for (archive.py)
    archived_wal_bytes: int = 0  # WAL bytes kept for them (each bounded by archive_bytes)
