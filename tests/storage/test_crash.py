"""Crash at any point on the simulated disk; nothing acknowledged may be lost or garbled.

Each seed runs random writes, syncs, flushes and compactions with the disk set to crash at a
random mutating operation (mid-WAL-append, mid-fsync, mid-flush, mid-compaction, mid-MANIFEST
update, or inside the recovery of an earlier crash), loses the unsynced bytes (often keeping a torn
prefix), reopens and checks:

- the recovered contents equal the model after some prefix of the issued operations, and that
  prefix includes every acknowledged one (acknowledged = followed by a returned `sync()`, or
  returned from `put`/`delete` under `always`; never under `none`, where only the prefix rule
  holds). So every acknowledged write is there with its latest acknowledged value, and anything
  else is a whole write that was really issued, in order: never garbage, never an older value
  resurrected.
"""

from __future__ import annotations

import random

import pytest

from bhandar_cli.storage.compaction import TierPolicy
from bhandar_cli.storage.disk.sim_disk import SimDisk, SimulatedCrash
from bhandar_cli.storage.engine import LSMEngine
from bhandar_cli.storage.engine_options import EngineOptions
from bhandar_cli.storage.wal import FsyncPolicy

from .conftest import Op, recover_and_check, union


def _options(rng: random.Random) -> EngineOptions:
    return EngineOptions(
        fsync=FsyncPolicy(rng.choice(["batch", "batch", "always", "none"])),
        memtable_bytes=rng.choice([200, 600, 2000]),
        block_bytes=rng.choice([64, 256]),
        tiers=TierPolicy(min_tables=rng.choice([2, 3, 4]), small_table_bytes=rng.choice([100, 5000])),
        block_cache_bytes=rng.choice([0, 2048]),
    )


def run_seed(seed: int, rounds: int = 4, steps: int = 300) -> int:
    """Crash and recover `rounds` times; returns the number of crashes that hit mid-operation."""
    rng = random.Random(seed)
    disk = SimDisk()
    opts = _options(rng)
    merge = union if rng.random() < 0.3 else None
    keys = [b"k%02d" % i for i in range(rng.choice([5, 30]))]
    history: list[Op] = []
    acked = 0
    hits = 0
    for _ in range(rounds):
        disk.crash_at = disk.ops + rng.randint(1, 250)
        try:
            eng = LSMEngine(disk, "/db", opts, merge)  # recovery itself may crash too
            for _ in range(steps):
                r = rng.random()
                if r < 0.55:
                    op: Op = (rng.choice(keys), b"v%d" % len(history))
                elif r < 0.7:
                    op = (rng.choice(keys), None)
                elif r < 0.85:
                    eng.sync()
                    if opts.fsync != "none":  # under `none` nothing is ever promised
                        acked = len(history)
                    continue
                elif r < 0.93:
                    eng.flush()
                    continue
                else:
                    eng.compact(full=rng.random() < 0.3)
                    continue
                history.append(op)
                if op[1] is None:
                    eng.delete(op[0])
                else:
                    eng.put(op[0], op[1])
                if opts.fsync == "always":
                    acked = len(history)
        except SimulatedCrash:
            hits += 1
        disk.crash(rng, torn=rng.random() < 0.8)
        recover_and_check(disk, opts, merge, keys, history, acked, seed)
        acked = len(history)
    return hits


@pytest.mark.parametrize("block", range(8))
def test_crash_at_any_point_loses_nothing_acknowledged(block: int) -> None:
    hits = sum(run_seed(seed) for seed in range(block * 25, block * 25 + 25))
    assert hits > 50  # most crashes really landed inside an operation, not after the run


def test_crash_points_cover_flush_compaction_and_manifest_updates() -> None:
    """The crash points are not all WAL appends: count what the crashing call was doing."""
    seen: set[str] = set()
    for seed in range(60):
        rng = random.Random(seed)
        disk = SimDisk()
        eng = LSMEngine(disk, "/db", EngineOptions(memtable_bytes=300, block_bytes=64, tiers=TierPolicy(2)))
        disk.crash_at = disk.ops + rng.randint(1, 400)
        try:
            for i in range(500):
                eng.put(b"k%d" % rng.randrange(40), b"v%d" % i)
                if i % 10 == 0:
                    eng.sync()
        except SimulatedCrash as e:
            seen.add(str(e).split(" /")[0].split(" of ")[0])
    assert {"crash during write", "crash during fsync", "crash before rename", "crash before remove"} <= seen
