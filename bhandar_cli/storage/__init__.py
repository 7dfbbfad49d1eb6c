"""Per-node storage: the LSM engine (WAL, memtables, SSTables, Bloom filters) over a Disk.

Sans-I/O: every byte goes through an injected `Disk` (disk/: `interface.Disk`, `real_disk.RealDisk`
for files, `sim_disk.SimDisk` for crash tests); nothing here reads the clock or the global
`random`, and nothing here imports the core (store/ keeps the core's records on this engine).

- `engine.LSMEngine(disk, directory, options=EngineOptions(), merge=None)`: put, delete, get,
  scan, begin_sync / sync (group commit), background_job, flush, compact, maybe_compact,
  snapshot, stats, close. Its docstring states who owns what: one owner thread, and workers
  that only ever get a job (`jobs.py`) or a sync function (`syncs.py`).
- `engine_options.py` the tunables, `tree.py` sealed memtables, live tables and installing jobs,
  `version.py` the live-table set, `reads.py` point lookups and scan runs, `status.py` closed
  or poisoned, `wal.py` log records and recovery, `memtable.py`, `sstable.py` tables (read),
  `table_writer.py` tables (written), `blocks.py` data blocks and the block cache, `bloom.py`
  filters (blocked, and the classic format still read) and `measure_false_positive_rate`,
  `compaction.py` size tiers and the k-way merge, `manifest.py` the list of live files,
  `recovery.py` open after a crash, `record_kinds.py` record kinds and the merge fold,
  `reports.py` reports and stats, `storage_errors.py`, `cipher.py` encryption at rest (AES-GCM
  sealing of WAL records and table blocks, the key check); disk/ the disk layer (the interface,
  the real and the simulated disk). A node's sync worker thread is node/sync_worker.py's; the
  data directory's lock is store/data_dir_lock.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.storage.archive import ArchiveInfo, SnapshotDamaged, close_all, verify
    from bhandar_cli.storage.bloom import measure_false_positive_rate
    from bhandar_cli.storage.cipher import KEY_BYTES, DataCipher
    from bhandar_cli.storage.compaction import TierPolicy
    from bhandar_cli.storage.damage import Corruption, KeyInterval
    from bhandar_cli.storage.engine import LSMEngine
    from bhandar_cli.storage.engine_options import EngineOptions
    from bhandar_cli.storage.jobs import BackgroundJob
    from bhandar_cli.storage.pitr import NoWriteTimes, Split, split
    from bhandar_cli.storage.recovery import restore_snapshot
    from bhandar_cli.storage.reports import EngineStats
    from bhandar_cli.storage.storage_errors import DataKeyError, StorageError
    from bhandar_cli.storage.wal import FsyncPolicy

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "KEY_BYTES",
    "ArchiveInfo",
    "BackgroundJob",
    "Corruption",
    "DataCipher",
    "DataKeyError",
    "EngineOptions",
    "EngineStats",
    "FsyncPolicy",
    "KeyInterval",
    "LSMEngine",
    "NoWriteTimes",
    "SnapshotDamaged",
    "Split",
    "StorageError",
    "TierPolicy",
    "close_all",
    "measure_false_positive_rate",
    "restore_snapshot",
    "split",
    "verify",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "ArchiveInfo": "archive",
            "BackgroundJob": "jobs",
            "Corruption": "damage",
            "DataCipher": "cipher",
            "DataKeyError": "storage_errors",
            "EngineOptions": "engine_options",
            "EngineStats": "reports",
            "FsyncPolicy": "wal",
            "KEY_BYTES": "cipher",
            "KeyInterval": "damage",
            "LSMEngine": "engine",
            "NoWriteTimes": "pitr",
            "SnapshotDamaged": "archive",
            "Split": "pitr",
            "StorageError": "storage_errors",
            "TierPolicy": "compaction",
            "close_all": "archive",
            "measure_false_positive_rate": "bloom",
            "restore_snapshot": "recovery",
            "split": "pitr",
            "verify": "archive",
        },
    )
