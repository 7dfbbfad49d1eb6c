"""Shared helpers for the storage tests: small engines on the simulated disk, and the model of
what a crash may leave (a prefix of the issued writes that includes every acknowledged one)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bhandar_cli.storage.compaction import TierPolicy
from bhandar_cli.storage.disk.sim_disk import SimDisk
from bhandar_cli.storage.engine import LSMEngine
from bhandar_cli.storage.engine_options import EngineOptions
from bhandar_cli.storage.record_kinds import Merge

# Tiny tables so a few hundred writes exercise flushes, several blocks per table and compaction.
SMALL = EngineOptions(
    memtable_bytes=1500,
    block_bytes=128,
    tiers=TierPolicy(min_tables=3, small_table_bytes=512),
    block_cache_bytes=4096,
)


def small_engine(disk: SimDisk | None = None, directory: str = "/db", **overrides: Any) -> LSMEngine:
    return LSMEngine(disk or SimDisk(), directory, replace(SMALL, **overrides))


Op = tuple[bytes, bytes | None]  # (key, value) or (key, None) for a delete


def apply_op(model: dict[bytes, bytes], op: Op, merge: Merge | None) -> None:
    key, value = op
    if value is None:
        model.pop(key, None)
    elif merge is not None and key in model:
        model[key] = merge(value, model[key])
    else:
        model[key] = value


def union(newer: bytes, older: bytes) -> bytes:
    """Set union of comma-separated tokens: a stand-in for the store's sibling merge."""
    return b",".join(sorted(set(newer.split(b",")) | set(older.split(b","))))


def matching_prefix(
    history: list[Op], acked: int, state: dict[bytes, bytes], merge: Merge | None
) -> int | None:
    """The length of a prefix of `history`, at least `acked` long, whose result is `state`."""
    model: dict[bytes, bytes] = {}
    for op in history[:acked]:
        apply_op(model, op, merge)
    for p in range(acked, len(history) + 1):
        if p > acked:
            apply_op(model, history[p - 1], merge)
        if model == state:
            return p
    return None


def recover_and_check(
    disk: SimDisk,
    options: EngineOptions,
    merge: Merge | None,
    keys: list[bytes],
    history: list[Op],
    acked: int,
    seed: int,
) -> None:
    """Reopen after a crash and check that what survived is the result of some prefix of the issued
    operations holding every acknowledged one; then that prefix is the history (it is durable now:
    the acknowledged history of the next round)."""
    eng = LSMEngine(disk, "/db", options, merge)
    state = dict(eng.scan())
    assert all(eng.get(k) == state.get(k) for k in keys), f"seed {seed}: get and scan disagree"
    p = matching_prefix(history, acked, state, merge)
    assert p is not None, (
        f"seed {seed}: recovered state is not the result of any prefix ≥ {acked} acknowledged of "
        f"{len(history)} issued operations; recovery said: {eng.recovery.summary}"
    )
    del history[p:]
    eng.close()
