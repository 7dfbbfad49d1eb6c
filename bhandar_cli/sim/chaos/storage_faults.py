"""Storage faults for chaos runs: every simulated node on the LSM engine over its own simulated disk.

`LSMHosts` plugs into `SimCluster` (`store_factory`, `crash_store`, `reopen_store`): each host gets a
`SimDisk` and a `RecordStore` with a small memtable (so flushes and compactions happen within a
short run) and group commit (`fsync="batch"`: a write is durable only after the driver's `sync()`).
A crash of the host is a power loss of its disk: unsynced bytes are lost and the last record may
be torn (`SimDisk.crash(rng, torn=True)`). The restart opens a new `RecordStore` on the same disk,
so recovery replays the WAL and truncates a torn tail, exactly as after a real crash. `arm` makes
a crash strike *inside* one of the next disk operations instead (a WAL append, an fsync, a flush,
a compaction, a MANIFEST rewrite): the engine raises `SimulatedCrash` in the middle of the node's
step, and the driver kills the node there, between its write and its sync.

Until the cluster drives the engines' background jobs, a flush happens in the write that seals
a memtable while `max_sealed_memtables` others wait (a stall), followed by a due compaction; with
jobs driven, crashes can also strike between a job's `run` and its `finish`.

The torn-write choices come from the run's own `random.Random` (a child of the seed), so a seed
replays its crashes byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from random import Random
from typing import Any

from bhandar_cli.core.model import Store
from bhandar_cli.storage import EngineOptions, FsyncPolicy
from bhandar_cli.storage.disk import SimDisk, SimulatedCrash
from bhandar_cli.store import RecordStore

STORAGE_KINDS: tuple[str, ...] = ("memory", "lsm")
DIRECTORY = "/node"
# Small enough that a run of a thousand operations flushes and compacts often on every node (so crashes
# land in flushes and compactions too); large enough that flushing is not the whole cost of a run.
MEMTABLE_BYTES = 4 << 10
ARM_WINDOW = 40  # a crash "during I/O" strikes within this many mutating disk operations


@dataclass
class StorageStats:
    """What the disks went through in a run (deterministic: it depends only on the seed)."""

    crashes: int = 0
    mid_io: int = 0  # crashes inside a disk operation (a WAL append, an fsync, a flush...)
    torn_tails: int = 0  # crashes that left part of an unsynced tail on disk
    unsynced_bytes_lost: int = 0  # unsynced bytes at the crashes (lost, or kept torn and truncated)
    truncated_bytes: int = 0  # bytes recovery cut from WAL tails (torn records)
    recoveries: int = 0
    flushes: int = 0
    compactions: int = 0
    fsyncs: int = 0


@dataclass
class LSMHosts:
    """One `SimDisk` per host, and the hooks that crash and recover it."""

    rng: Random
    memtable_bytes: int = MEMTABLE_BYTES
    disks: dict[str, SimDisk] = field(default_factory=dict)
    stats: StorageStats = field(default_factory=StorageStats)
    _flushes: dict[str, int] = field(default_factory=dict)  # of engines that died, per host
    _compactions: dict[str, int] = field(default_factory=dict)
    _armed: set[str] = field(default_factory=set)

    def options(self) -> EngineOptions:
        return EngineOptions(memtable_bytes=self.memtable_bytes, fsync=FsyncPolicy.BATCH)

    def hooks(self) -> dict[str, Any]:
        """`SimCluster`'s arguments that put its hosts on these disks (arming a crash happens only
        when a fault asks for it)."""
        return {
            "store_factory": self.create,
            "crash_store": self.crash,
            "reopen_store": self.reopen,
            "arm_crash": self.arm,
            "crash_errors": (SimulatedCrash,),
        }

    def create(self, name: str) -> Store:
        disk = self.disks[name] = SimDisk()
        return RecordStore(disk, DIRECTORY, self.options())

    def arm(self, name: str, store: Store) -> None:
        """Make the disk fail inside one of its next few mutating operations (`SimulatedCrash`)."""
        disk = self.disks[name]
        disk.crash_at = disk.ops + self.rng.randint(1, ARM_WINDOW)
        self._armed.add(name)

    def crash(self, name: str, store: Store) -> None:
        """Power loss: unsynced writes are lost, the last record possibly torn."""
        disk = self.disks[name]
        self._count_engine(name, store)
        self.stats.crashes += 1
        if name in self._armed:
            self._armed.discard(name)
            if disk.crash_at is None:  # it fired: the crash interrupted a disk operation
                self.stats.mid_io += 1
        self.stats.unsynced_bytes_lost += disk.unsynced_bytes()
        if disk.crash(self.rng, torn=True):
            self.stats.torn_tails += 1

    def reopen(self, name: str, store: Store) -> Store:
        """The restart: a new engine on the same disk recovers what the crash left."""
        reopened = RecordStore(self.disks[name], DIRECTORY, self.options())
        self.stats.recoveries += 1
        self.stats.truncated_bytes += reopened.engine.recovery.bytes_truncated
        return reopened

    def compact(self, store: Store) -> None:
        """Flush the memtable and merge every table into one (a maintenance step before repair)."""
        if isinstance(store, RecordStore):
            store.flush()
            store.compact()

    def _count_engine(self, name: str, store: Store) -> None:
        if isinstance(store, RecordStore):
            self._flushes[name] = self._flushes.get(name, 0) + store.engine.flushes
            self._compactions[name] = self._compactions.get(name, 0) + store.engine.compactions

    def finish(self, stores: dict[str, Store]) -> StorageStats:
        """Totals over every host's lives, given the stores the hosts hold now."""
        stats = self.stats
        stats.flushes = sum(self._flushes.values())
        stats.compactions = sum(self._compactions.values())
        for store in stores.values():
            if isinstance(store, RecordStore):
                stats.flushes += store.engine.flushes
                stats.compactions += store.engine.compactions
        stats.fsyncs = sum(disk.fsync_count for disk in self.disks.values())
        return stats
