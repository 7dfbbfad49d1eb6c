"""`EngineOptions`: the storage engine's tunables, checked when they are made."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bhandar_cli.storage.blocks import DEFAULT_BLOCK_BYTES
from bhandar_cli.storage.cipher import DataCipher
from bhandar_cli.storage.compaction import TierPolicy
from bhandar_cli.storage.wal import FsyncPolicy


@dataclass(frozen=True)
class EngineOptions:
    fsync: FsyncPolicy = FsyncPolicy.BATCH
    memtable_bytes: int = 4 << 20  # a memtable this full is sealed and waits for its flush
    # Sealed memtables that may wait for a flush job; one more makes the write that sealed it
    # flush the oldest itself (backpressure, counted in `EngineStats.write_stalls`).
    max_sealed_memtables: int = 2
    block_bytes: int = DEFAULT_BLOCK_BYTES
    bloom_bits_per_key: int = 10
    bloom_hashes: int = 7
    tiers: TierPolicy = field(default_factory=TierPolicy)
    # Due compactions run unasked: as background jobs, and inline in a write that stalls while
    # no compaction is in flight (so an engine nobody drives jobs for still compacts).
    auto_compact: bool = True
    block_cache_bytes: int = 16 << 20
    verify_on_open: bool = True  # check every block's CRC when a table is opened
    # The most WAL bytes kept for one snapshot (archive.py): past it the archive is full and a
    # restore can bring back nothing written later. Bounds the disk a forgotten snapshot holds.
    archive_bytes: int = 1 << 30
    # Wall-clock seconds (time.time), handed in by the node: while a snapshot archives the WALs,
    # writes are marked with it so a restore can stop at a moment. None: no marks (restores go
    # back to the snapshot only).
    wall_clock: Callable[[], float] | None = field(default=None, compare=False)
    # Encryption at rest (cipher.py): new WALs and tables are sealed under this data key; plain
    # files written before are still read. None: plain (an encrypted directory then refuses).
    cipher: DataCipher | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fsync", FsyncPolicy(self.fsync))  # accept "batch" as well
        for name in ("memtable_bytes", "block_bytes", "bloom_bits_per_key", "bloom_hashes"):
            if getattr(self, name) < 1:
                raise ValueError(f"EngineOptions.{name} must be positive, got {getattr(self, name)}")
        if self.max_sealed_memtables < 0:
            raise ValueError(
                f"EngineOptions.max_sealed_memtables must be ≥ 0, got {self.max_sealed_memtables}"
            )
