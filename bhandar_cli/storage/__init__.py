"""Per-node storage: the LSM engine (WAL, memtable, SSTables, Bloom filters) over a Disk.

Sans-I/O: every byte goes through an injected `disk.Disk` (`node.disk.RealDisk` for files,
`sim.disk.SimDisk` for crash tests); nothing here reads the clock or the global `random`
(except `bench.py`, the measurement harness, which says why).

- `engine.LSMEngine(disk, directory, options=EngineOptions(), merge=None)`: put, delete, get,
  scan, sync (group commit), flush, compact, maybe_compact, snapshot, stats, close.
- `wal.py` log records and recovery, `memtable.py`, `sstable.py` tables and the block cache,
  `bloom.py` filters and `measure_false_positive_rate`, `compaction.py` size tiers and the
  k-way merge, `manifest.py` the list of live files, `recovery.py` open after a crash,
  `records.py` record kinds and the merge fold, `reports.py` reports and stats, `errors.py`.
"""
