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
