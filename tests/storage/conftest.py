"""Shared helpers for the storage tests: small engines on the simulated disk."""

from __future__ import annotations

from bhandar_cli.sim.disk import SimDisk
from bhandar_cli.storage.compaction import TierPolicy
from bhandar_cli.storage.engine import EngineOptions, LSMEngine

# Tiny tables so a few hundred writes exercise flushes, several blocks per table and compaction.
SMALL = EngineOptions(
    memtable_bytes=1500,
    block_bytes=128,
    tiers=TierPolicy(min_tables=3, small_table_bytes=512),
    block_cache_bytes=4096,
)


def small_engine(disk: SimDisk | None = None, directory: str = "/db", **overrides: object) -> LSMEngine:
    from dataclasses import replace

    return LSMEngine(disk or SimDisk(), directory, replace(SMALL, **overrides))
