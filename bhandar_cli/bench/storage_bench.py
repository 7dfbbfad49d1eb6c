"""`run_storage_bench`: the LSM engine on the real disk against sqlite3 (and LevelDB, when the
optional `plyvel` package is installed) doing the same work, each in a child process of its own
(see storage_contenders.py for the workload and what each side's durability means);
`run_engine_jobs_bench`: how long background jobs take, and which part of them the owner thread
(a node's event loop) still runs. `python -m bhandar_cli.bench.storage_bench DIR [MB]` prints the
latter as JSON.

A measurement harness (run by `bhandar bench storage`), not engine code: it lives in the driver
layer because it reads the clock, uses the real disk (`storage.disk.real_disk.RealDisk`), sqlite3
and processes.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import os
import random
import sqlite3
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from bhandar_cli.bench.storage_contenders import (
    ENGINE,
    ENGINE_ENCRYPTED,
    LEVELDB,
    SQLITE,
    SQLITE_FULL,
    measure_side,
)
from bhandar_cli.storage import BackgroundJob, EngineOptions, LSMEngine


def leveldb_available() -> bool:
    return importlib.util.find_spec("plyvel") is not None


def _in_child(side: str, directory: str, *args: Any) -> dict[str, Any]:
    """`measure_side` in a fresh process (spawned, not forked: a fork's peak RSS starts at ours)."""
    path = os.path.join(directory, side)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
        result: dict[str, Any] = child.submit(measure_side, side, path, *args).result()
    return result


def run_storage_bench(
    directory: str,
    keys: int = 100_000,
    value_size: int = 100,
    seed: int = 0,
    *,
    batch: int = 64,
    durable_baseline: bool = False,
    leveldb: bool | None = None,
    options: EngineOptions | None = None,
    encrypt: bool = False,
) -> dict[str, Any]:
    """Measure the engine, sqlite3 and (if `leveldb`, by default when plyvel is installed)
    LevelDB on the same workload in `directory` (must be empty or new), one after the other;
    with `encrypt`, the engine encrypting at rest too ("engine_encrypted", and its rates over the
    plain engine's as "encrypted_*_ratio").

    Returns {"engine": {...}, "sqlite": {...}, "put_ratio", "get_ratio", "get_miss_ratio", ...}
    with rates in operations per second, peak RSS in MiB and ratios as engine / other side.
    """
    if not 1 <= keys <= 10_000_000 or value_size < 0 or batch < 1:
        raise ValueError(
            f"need 1 ≤ keys ≤ 10^7, value_size ≥ 0, batch ≥ 1; got {keys}, {value_size}, {batch}"
        )
    if os.path.isdir(directory) and os.listdir(directory):
        raise ValueError(f"bench directory {directory} is not empty")
    os.makedirs(directory, exist_ok=True)
    if leveldb is None:
        leveldb = leveldb_available()
    args = (keys, value_size, seed, batch, options)
    engine = _in_child(ENGINE, directory, *args)
    sqlite = _in_child(SQLITE, directory, *args)
    result: dict[str, Any] = {
        "keys": keys,
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
    if encrypt:
        sealed = result["engine_encrypted"] = _in_child(ENGINE_ENCRYPTED, directory, *args)
        for name in ("puts", "get_hits", "get_misses"):
            result[f"encrypted_{name}_ratio"] = sealed[f"{name}_per_s"] / engine[f"{name}_per_s"]
        result["encrypted_disk_ratio"] = sealed["disk_bytes"] / max(1, engine["disk_bytes"])
    if durable_baseline:
        full = result["sqlite_full"] = _in_child(SQLITE_FULL, directory, *args)
        result["put_ratio_full"] = engine["puts_per_s"] / full["puts_per_s"]
    if leveldb:
        level = result["leveldb"] = _in_child(LEVELDB, directory, *args)
        result["leveldb_put_ratio"] = engine["puts_per_s"] / level["puts_per_s"]
        result["leveldb_get_ratio"] = engine["get_hits_per_s"] / level["get_hits_per_s"]
        result["leveldb_get_miss_ratio"] = engine["get_misses_per_s"] / level["get_misses_per_s"]
    return result


def _ms(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        return {"count": 0, "max_ms": 0.0, "mean_ms": 0.0}
    return {
        "count": len(seconds),
        "max_ms": round(max(seconds) * 1000, 3),
        "mean_ms": round(sum(seconds) / len(seconds) * 1000, 3),
    }


def run_engine_jobs_bench(
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
    from bhandar_cli.storage.disk import RealDisk  # see the module docstring

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
    print(json.dumps(run_engine_jobs_bench(sys.argv[1], megabytes << 20), indent=2))
