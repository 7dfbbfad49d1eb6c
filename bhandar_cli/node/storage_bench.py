"""`run_storage_bench`: the LSM engine on the real disk against sqlite3 doing the same work.

A measurement harness (run by `bhandar bench storage`), not engine code: it lives in the driver
layer because it reads the clock, uses the real disk (`node.disk.RealDisk`) and sqlite3.

Workload (same for both sides, same run, so the ratio means something on a noisy machine):
- puts: `ops` random 20-byte keys with random `value_size`-byte values, each written by its own
  call (as a node handles one request at a time), made durable in groups of `batch` (default 64)
  writes: the engine's `sync()` under the default `batch` policy (one fsync per group), and one
  sqlite transaction per group (journal_mode=WAL, synchronous=NORMAL).
- gets: `ops` lookups of random present keys (hits), then `ops` of absent keys (misses).

Note the durability gap: sqlite's WAL mode with synchronous=NORMAL does not fsync at COMMIT (only
at checkpoints), so a committed group can be lost on power failure; the engine's `sync()` fsyncs.
`sqlite_full` (synchronous=FULL: fsync per commit, the same promise as ours) is measured too when
`durable_baseline=True`.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable

from bhandar_cli.storage.engine import EngineOptions, LSMEngine


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def _timed(fn: Callable[[], int]) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = fn()
    return n, time.perf_counter() - t0


def _workload(
    ops: int, value_size: int, seed: int
) -> tuple[list[bytes], list[bytes], list[bytes], list[bytes]]:
    rng = random.Random(seed)
    keys = list(dict.fromkeys(b"user:%016x" % rng.getrandbits(64) for _ in range(ops)))
    pool = [rng.randbytes(value_size) for _ in range(min(len(keys), 4096))]
    values = [pool[i % len(pool)] for i in range(len(keys))]
    hits = rng.choices(keys, k=ops)
    present = set(keys)
    misses: list[bytes] = []
    while len(misses) < ops:
        k = b"user:%016x" % rng.getrandbits(64)
        if k not in present:
            misses.append(k)
    return keys, values, hits, misses


def _bench_engine(
    path: str, data: tuple, batch: int, options: EngineOptions | None
) -> dict[str, float | int]:
    from bhandar_cli.node.disk import RealDisk  # see the module docstring

    keys, values, hits, misses = data
    disk = RealDisk()
    engine = LSMEngine(disk, path, options)

    def puts() -> int:
        put, sync = engine.put, engine.sync
        for i, (k, v) in enumerate(zip(keys, values, strict=True), 1):
            put(k, v)
            if i % batch == 0:
                sync()
        sync()
        return len(keys)

    def gets(which: list[bytes]) -> Callable[[], int]:
        def run() -> int:
            get = engine.get
            return sum(get(k) is not None for k in which)

        return run

    rates = _measure("engine", puts, gets, hits, misses)
    stats = engine.stats()
    engine.close()
    return {
        **rates,
        "fsyncs": stats.fsyncs,
        "sstables": stats.sstables,
        "flushes": stats.flushes,
        "compactions": stats.compactions,
        "disk_bytes": stats.disk_bytes,
    }


def _bench_sqlite(path: str, data: tuple, batch: int, synchronous: str) -> dict[str, float | int]:
    keys, values, hits, misses = data
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
    cur = db.cursor()

    def puts() -> int:
        execute = cur.execute
        execute("BEGIN")
        for i, (k, v) in enumerate(zip(keys, values, strict=True), 1):
            execute("INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", (k, v))
            if i % batch == 0:
                execute("COMMIT")
                execute("BEGIN")
        execute("COMMIT")
        return len(keys)

    def gets(which: list[bytes]) -> Callable[[], int]:
        def run() -> int:
            execute = cur.execute
            return sum(execute("SELECT v FROM kv WHERE k = ?", (k,)).fetchone() is not None for k in which)

        return run

    rates = _measure("sqlite", puts, gets, hits, misses)
    db.close()
    return rates


def _measure(
    label: str,
    puts: Callable[[], int],
    gets: Callable[[list[bytes]], Callable[[], int]],
    hits: list[bytes],
    misses: list[bytes],
) -> dict[str, float | int]:
    """Time the puts, then the hits, then the misses; check every read answered truly."""
    n_put, t_put = _timed(puts)
    found, t_hit = _timed(gets(hits))
    false_found, t_miss = _timed(gets(misses))
    if found != len(hits) or false_found:
        raise AssertionError(
            f"{label} bench read back {found}/{len(hits)} hits and {false_found} phantom keys"
        )
    return {
        "puts_per_s": _rate(n_put, t_put),
        "get_hits_per_s": _rate(len(hits), t_hit),
        "get_misses_per_s": _rate(len(misses), t_miss),
    }


def run_storage_bench(
    directory: str,
    ops: int = 100_000,
    value_size: int = 100,
    seed: int = 0,
    *,
    batch: int = 64,
    durable_baseline: bool = False,
    options: EngineOptions | None = None,
) -> dict[str, object]:
    """Measure the engine and sqlite3 on the same workload in `directory` (must be empty or new).

    Returns {"engine": {...}, "sqlite": {...}, "put_ratio", "get_ratio", "get_miss_ratio", ...}
    with rates in operations per second and ratios as engine / sqlite.
    """
    if ops < 1 or value_size < 0 or batch < 1:
        raise ValueError(f"need ops ≥ 1, value_size ≥ 0, batch ≥ 1; got {ops}, {value_size}, {batch}")
    if os.path.isdir(directory) and os.listdir(directory):
        raise ValueError(f"bench directory {directory} is not empty")
    os.makedirs(directory, exist_ok=True)
    data = _workload(ops, value_size, seed)
    engine = _bench_engine(os.path.join(directory, "engine"), data, batch, options)
    sqlite = _bench_sqlite(os.path.join(directory, "sqlite-normal.db"), data, batch, "NORMAL")
    result: dict[str, object] = {
        "ops": len(data[0]),
        "value_size": value_size,
        "seed": seed,
        "batch": batch,
        "engine": engine,
        "sqlite": sqlite,
        "put_ratio": engine["puts_per_s"] / sqlite["puts_per_s"],
        "get_ratio": engine["get_hits_per_s"] / sqlite["get_hits_per_s"],
        "get_miss_ratio": engine["get_misses_per_s"] / sqlite["get_misses_per_s"],
        "sqlite_version": sqlite3.sqlite_version,
    }
    if durable_baseline:
        full = _bench_sqlite(os.path.join(directory, "sqlite-full.db"), data, batch, "FULL")
        result["sqlite_full"] = full
        result["put_ratio_full"] = engine["puts_per_s"] / full["puts_per_s"]
    return result
