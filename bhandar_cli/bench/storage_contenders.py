"""The stores `bhandar bench storage` compares, each measured in a child process of its own.

A side is our LSM engine (plain, or encrypting at rest under a fresh random key: storage/cipher.py),
sqlite3 (WAL mode) or LevelDB (through the optional `plyvel` package).
`measure_side` runs in a fresh (spawned) process that holds nothing but that one store and the
keys of the chunk in hand, so the peak RSS it reports (`ru_maxrss`) is the store's (and the
interpreter's, reported apart as `rss_start_mb`), not the harness's nor another store's.

EngineWorkload (the same for every side): `keys` puts of distinct 21-byte keys in a random order, each
its own call (as a node handles one request at a time), made durable every `batch` puts; then
`keys` gets of random present keys (hits), then `keys` gets of absent keys (misses). Keys are
`user:` + 16 hex digits of splitmix64's finalizer of (seed, index): a bijection on 64-bit integers,
so distinct indexes give distinct keys without a set of keys kept to prove it, and indexes from
`keys` on are certainly absent. Keys are made a chunk at a time, outside the timed loops.

Durability: the engine's `sync()` fsyncs (one group commit per batch); sqlite3 commits one
transaction per batch, with synchronous=NORMAL (no fsync at commit, only at checkpoints) or FULL
(an fsync per commit, the engine's promise); LevelDB writes the batch's last put with sync=True
(an fsync of its log, covering the puts before it).
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import sqlite3
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Protocol

from bhandar_cli.storage import BackgroundJob, DataCipher, EngineOptions, LSMEngine

ENGINE, SQLITE, SQLITE_FULL, LEVELDB = "engine", "sqlite", "sqlite_full", "leveldb"
ENGINE_ENCRYPTED = "engine_encrypted"
_CHUNK = 4096
_MASK64 = (1 << 64) - 1
_VALUES = 4096  # distinct values, reused in turn (a value per key would be the harness's memory)


def _mix(x: int) -> int:
    """splitmix64's finalizer: every step is invertible on 64-bit integers, so it is a bijection."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


class EngineWorkload:
    """The keys and values of a run, made on demand from (keys, value size, seed)."""

    def __init__(self, keys: int, value_size: int, seed: int) -> None:
        self.keys = keys
        self._base = (seed << 34) & _MASK64  # indexes stay below 2^34: 2 × keys ≤ 2 × 10^7
        rng = random.Random(seed)
        self.values = [rng.randbytes(value_size) for _ in range(_VALUES)]

    def key(self, index: int) -> bytes:
        return b"user:%016x" % _mix((self._base + index) & _MASK64)

    def puts(self) -> Iterator[list[tuple[bytes, bytes]]]:
        key, values = self.key, self.values
        for start in range(0, self.keys, _CHUNK):
            yield [(key(i), values[i % _VALUES]) for i in range(start, min(start + _CHUNK, self.keys))]

    def hits(self) -> Iterator[list[bytes]]:
        key, n = self.key, self.keys
        for start in range(0, n, _CHUNK):
            yield [key(_mix(i ^ _MASK64) % n) for i in range(start, min(start + _CHUNK, n))]

    def misses(self) -> Iterator[list[bytes]]:
        key, n = self.key, self.keys
        for start in range(n, 2 * n, _CHUNK):
            yield [key(i) for i in range(start, min(start + _CHUNK, 2 * n))]


class Side(Protocol):
    def put(self, key: bytes, value: bytes, durable: bool) -> None:
        """Write; with `durable`, also make every put so far durable (the end of a batch)."""
        ...

    def settle(self) -> None:
        """Return once the work the puts caused is done (the engine's background jobs)."""
        ...

    def found(self, key: bytes) -> bool: ...

    def figures(self) -> dict[str, Any]:
        """What the store says about itself after the run (tables, fsyncs, cache hits...)."""
        ...

    def close(self) -> None: ...


class _Engine:
    """The engine as a node drives it: flushes and compactions run on a worker thread (`run`)
    and are installed back on this one (`finish`), checked for at every batch's sync."""

    def __init__(self, path: str, options: EngineOptions | None) -> None:
        from bhandar_cli.storage.disk import RealDisk  # the driver layer's disk: this is a harness

        self.engine = LSMEngine(RealDisk(), path, options)
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="storage-job")
        self._running: list[tuple[Future[None], BackgroundJob]] = []

    def put(self, key: bytes, value: bytes, durable: bool) -> None:
        self.engine.put(key, value)
        if durable:
            self.engine.sync()
            self._drive_jobs()

    def _drive_jobs(self, wait: bool = False) -> None:
        running = []
        for future, job in self._running:
            if wait or future.done():
                future.result()
                job.finish()
            else:
                running.append((future, job))
        self._running = running
        while (due := self.engine.background_job()) is not None:
            self._running.append((self._worker.submit(due.run), due))

    def settle(self) -> None:
        """Wait for the jobs the puts made due (until none is), so their cost counts as the puts'."""
        while self._running:
            self._drive_jobs(wait=True)

    def found(self, key: bytes) -> bool:
        return self.engine.get(key) is not None

    def figures(self) -> dict[str, Any]:
        s = self.engine.stats()
        return {
            "fsyncs": s.fsyncs,
            "sstables": s.sstables,
            "flushes": s.flushes,
            "compactions": s.compactions,
            "disk_bytes": s.disk_bytes,
            "block_cache_hits": s.block_cache_hits,
            "block_cache_misses": s.block_cache_misses,
        }

    def close(self) -> None:
        self.settle()
        self._worker.shutdown()
        self.engine.close()


class _Sqlite:
    def __init__(self, path: str, synchronous: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
        self.execute = self.db.cursor().execute
        self.execute("BEGIN")

    def put(self, key: bytes, value: bytes, durable: bool) -> None:
        self.execute("INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", (key, value))
        if durable:
            self.execute("COMMIT")
            self.execute("BEGIN")

    def settle(self) -> None:
        pass  # each batch's COMMIT did its work

    def found(self, key: bytes) -> bool:
        return self.execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone() is not None

    def figures(self) -> dict[str, Any]:
        return {"version": sqlite3.sqlite_version}

    def close(self) -> None:
        if self.db.in_transaction:
            self.execute("COMMIT")
        self.db.close()


class _LevelDB:
    def __init__(self, path: str) -> None:
        import plyvel  # the optional `leveldb` extra

        self.db = plyvel.DB(path, create_if_missing=True)
        self.version = getattr(plyvel, "__leveldb_version__", "?")

    def put(self, key: bytes, value: bytes, durable: bool) -> None:
        self.db.put(key, value, sync=durable)

    def settle(self) -> None:
        pass  # LevelDB compacts on threads of its own, which go on during the gets

    def found(self, key: bytes) -> bool:
        return self.db.get(key) is not None

    def figures(self) -> dict[str, Any]:
        return {"version": self.version}

    def close(self) -> None:
        self.db.close()


def _open(side: str, path: str, options: EngineOptions | None) -> Side:
    if side == ENGINE:
        return _Engine(path, options)
    if side == ENGINE_ENCRYPTED:  # a key of this run only: the bench measures, it keeps nothing
        cipher = DataCipher(os.urandom(32), os.urandom)
        return _Engine(path, replace(options or EngineOptions(), cipher=cipher))
    if side in (SQLITE, SQLITE_FULL):
        return _Sqlite(path, "FULL" if side == SQLITE_FULL else "NORMAL")
    if side == LEVELDB:
        return _LevelDB(path)
    raise ValueError(f"no storage bench side {side!r}")


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024  # bytes there, KiB on Linux


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


_PUTS, _HITS, _MISSES = "puts", "get_hits", "get_misses"


class _Clocks:
    """Wall-clock and CPU seconds spent in each phase of a run."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = dict.fromkeys((_PUTS, _HITS, _MISSES), 0.0)
        self.cpu: dict[str, float] = dict(self.wall)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        self.wall[name] += time.perf_counter() - wall
        self.cpu[name] += time.process_time() - cpu


def measure_side(
    side: str, path: str, keys: int, value_size: int, seed: int, batch: int, options: EngineOptions | None
) -> dict[str, Any]:
    """Run the workload on one side (in a process of its own: see the module docstring) and
    return its rates (per second), its figures and its peak RSS in MiB. Raises if a read
    answered wrongly (a hit not found, or a miss found)."""
    work = EngineWorkload(keys, value_size, seed)
    rss_start = _peak_rss_mb()
    store = _open(side, path, options)
    clock = _Clocks()
    done = found = phantom = 0
    for pairs in work.puts():
        put = store.put
        with clock.phase(_PUTS):
            for key, value in pairs:
                done += 1
                put(key, value, done % batch == 0 or done == keys)
    with clock.phase(_PUTS):
        store.settle()
    for chunk in work.hits():
        with clock.phase(_HITS):
            found += sum(map(store.found, chunk))
    for chunk in work.misses():
        with clock.phase(_MISSES):
            phantom += sum(map(store.found, chunk))
    figures = store.figures()
    store.close()
    if found != keys or phantom:
        raise AssertionError(f"{side} bench read back {found}/{keys} hits and {phantom} phantom keys")
    return {
        **{f"{name}_per_s": _rate(keys, clock.wall[name]) for name in (_PUTS, _HITS, _MISSES)},
        # Per second of this process's CPU (all its threads): steadier than the wall clock on a
        # busy machine, but blind to waits for the disk (the fsyncs of puts).
        **{f"{name}_per_cpu_s": _rate(keys, clock.cpu[name]) for name in (_PUTS, _HITS, _MISSES)},
        **figures,
        "rss_peak_mb": round(_peak_rss_mb(), 1),
        "rss_start_mb": round(rss_start, 1),
    }
