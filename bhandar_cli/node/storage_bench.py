"""`run_storage_bench`: the LSM engine on the real disk against sqlite3 doing the same work;
`run_compaction_bench`: how long background jobs take, and which part of them the owner thread
(a node's event loop) still runs. `python -m bhandar_cli.node.storage_bench DIR [MB]` prints the
latter as JSON.

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

import json
import os
import random
import sqlite3
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from bhandar_cli.storage.engine import EngineOptions, LSMEngine
from bhandar_cli.storage.jobs import BackgroundJob


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def _timed(fn: Callable[[], int]) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = fn()
    return n, time.perf_counter() - t0


Workload = tuple[list[bytes], list[bytes], list[bytes], list[bytes]]  # keys, values, hits, misses


def _workload(ops: int, value_size: int, seed: int) -> Workload:
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
    path: str, data: Workload, batch: int, options: EngineOptions | None
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


def _bench_sqlite(path: str, data: Workload, batch: int, synchronous: str) -> dict[str, float | int]:
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


def _ms(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        return {"count": 0, "max_ms": 0.0, "mean_ms": 0.0}
    return {
        "count": len(seconds),
        "max_ms": round(max(seconds) * 1000, 3),
        "mean_ms": round(sum(seconds) / len(seconds) * 1000, 3),
    }


def run_compaction_bench(
    directory: str,
    total_bytes: int = 50 << 20,
    value_size: int = 100,
    seed: int = 0,
    *,
    batch: int = 64,
    options: EngineOptions | None = None,
) -> dict[str, object]:
    """Fill an engine in `directory` (empty or new) with `total_bytes` of random keys and values,
    driving its jobs as a node runtime would (`run` on a worker thread, `finish` here), then time
    a forced full compaction's two halves.

    Returns, in milliseconds: the worker's and the owner's part of every flush and compaction
    (`finish` is what the event loop still stalls for), the longest single put (a put that
    stalled flushes inline), and the full compaction's `run` and `finish`.
    """
    from bhandar_cli.node.disk import RealDisk  # see the module docstring

    if total_bytes < 1 or value_size < 1 or batch < 1:
        raise ValueError(f"need positive sizes and batch; got {total_bytes}, {value_size}, {batch}")
    if os.path.isdir(directory) and os.listdir(directory):
        raise ValueError(f"bench directory {directory} is not empty")
    rng = random.Random(seed)
    engine = LSMEngine(RealDisk(), directory, options)
    pool = ThreadPoolExecutor(max_workers=2)
    running: dict[Future[float], BackgroundJob] = {}
    run_s: dict[str, list[float]] = {"flush": [], "compaction": []}
    finish_s: dict[str, list[float]] = {"flush": [], "compaction": []}
    longest_put = 0.0

    def timed_run(job: BackgroundJob) -> float:
        t0 = time.perf_counter()
        job.run()
        return time.perf_counter() - t0

    def finish_done(wait: bool) -> None:
        for future in [f for f in running if wait or f.done()]:
            job = running.pop(future)
            run_s[job.kind].append(future.result())
            t0 = time.perf_counter()
            job.finish()
            finish_s[job.kind].append(time.perf_counter() - t0)

    started = time.perf_counter()
    written = puts = 0
    while written < total_bytes:
        key = b"user:%016x" % rng.getrandbits(64)
        t0 = time.perf_counter()
        engine.put(key, rng.randbytes(value_size))
        longest_put = max(longest_put, time.perf_counter() - t0)
        written += len(key) + value_size
        puts += 1
        finish_done(wait=False)
        while (job := engine.background_job()) is not None:
            running[pool.submit(timed_run, job)] = job
        if puts % batch == 0:
            engine.sync()
    finish_done(wait=True)
    engine.flush()
    fill_s = time.perf_counter() - started
    before = engine.stats()
    full = engine.full_compaction_job()
    if full is None:  # every job was drained and the flush left at least one table
        raise RuntimeError("no full compaction could be handed out (a bug)")
    full_run = timed_run(full)
    t0 = time.perf_counter()
    report = full.finish()
    full_finish = time.perf_counter() - t0
    pool.shutdown()
    after = engine.stats()
    engine.close()
    return {
        "data_bytes": written,
        "fill_s": round(fill_s, 3),
        "tables_before": before.sstables,
        "sstable_bytes_before": before.sstable_bytes,
        "write_stalls": before.write_stalls,
        "longest_put_ms": round(longest_put * 1000, 3),
        "flush_run": _ms(run_s["flush"]),
        "flush_finish": _ms(finish_s["flush"]),
        "compaction_run": _ms(run_s["compaction"]),
        "compaction_finish": _ms(finish_s["compaction"]),
        "full_compaction": {
            "installed": report.installed,
            "run_ms": round(full_run * 1000, 3),
            "finish_ms": round(full_finish * 1000, 3),
            "tables_after": after.sstables,
            "sstable_bytes_after": after.sstable_bytes,
        },
    }


if __name__ == "__main__":
    megabytes = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    print(json.dumps(run_compaction_bench(sys.argv[1], megabytes << 20), indent=2))
