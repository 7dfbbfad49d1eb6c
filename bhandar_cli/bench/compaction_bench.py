"""`bhandar bench compaction`: does a big compaction on one node disturb the cluster?

On a running process cluster: fill the store until the target node holds at least `mb` MB on
disk, then run QUORUM gets from `concurrency` clients for `seconds` (the baseline, measured in the
same run), then again while the target runs a forced full compaction. Every 50 ms the other
nodes are asked whether they see the target up. The report gives p50/p99 of the gets in both
phases, how long the compaction took, and how many times a peer marked the target down: with
flush and compaction off the event loop, none, and the p99 barely moves.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import trio

from bhandar_cli.bench.echo_baselines import run_load

if TYPE_CHECKING:
    from bhandar_cli.client import Client, TcpBackend

KEYSPACE = "kv"
VALUE = b'"' + b"x" * 1000 + b'"'  # about 1 KB per record
POLL = 0.05


async def run_compaction_bench(
    client: Client[TcpBackend], target: str, mb: int, concurrency: int, seconds: float
) -> dict[str, Any]:
    backend = client.backend
    keys = await _fill(client, backend, target, mb, concurrency)
    before = await backend.node_info(target, counts=False)
    baseline, _ = await _phase(client, backend, target, keys, concurrency, seconds, None)
    during, compaction = await _phase(client, backend, target, keys, concurrency, seconds, target)
    return {
        "cmd": "bench compaction",
        "ok": compaction["ok"] and during["errors"] == 0,
        "target": target,
        "disk_mb": round(before.get("storage", {}).get("disk_bytes", 0) / 1e6, 1),
        "sstables": before.get("storage", {}).get("sstables", 0),
        "keys": len(keys),
        "compaction_s": compaction["seconds"],
        "compaction_error": compaction.get("error", ""),
        "baseline": baseline,
        "during": during,
        "marked_down": during["marked_down"],
        "down_samples": during["samples"],
    }


async def _fill(
    client: Client[TcpBackend], backend: TcpBackend, target: str, mb: int, concurrency: int
) -> list[str]:
    """Write until `target` holds `mb` MB on disk; returns the keys written."""
    info = await backend.node_info(target)
    keys = [f"c{i}" for i in range(info.get("keys", 0))]  # a bench that ran before wrote c0, c1, ...
    while True:
        if info.get("storage", {}).get("disk_bytes", 0) >= mb * 1_000_000 and keys:
            return keys
        start = len(keys)

        async def put(worker: int, i: int, start: int = start) -> str:
            await client.data.put(KEYSPACE, f"c{start + i}", VALUE, "application/json", "none")
            return "put"

        await run_load(5000, concurrency, put)
        keys.extend(f"c{start + i}" for i in range(5000))
        info = await backend.node_info(target, counts=False)


async def _phase(
    client: Client[TcpBackend],
    backend: TcpBackend,
    target: str,
    keys: list[str],
    concurrency: int,
    seconds: float,
    compact: str | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Gets for `seconds` (or until the compaction of `compact` ends, if given), peers polled."""
    latencies: list[float] = []
    errors = 0
    views = {"marked_down": 0, "samples": 0}
    compaction: dict[str, Any] = {"ok": True, "seconds": 0.0}
    peers = [n for n in backend.names if n != target]
    done = trio.Event()

    async def gets(worker: int) -> None:
        nonlocal errors
        i = worker
        while not done.is_set():
            started = time.perf_counter()
            try:
                await client.data.get(KEYSPACE, keys[i % len(keys)])
                latencies.append((time.perf_counter() - started) * 1000)
            except Exception:
                errors += 1
                await trio.sleep(0.01)  # an error answers at once: let the others run
            i += 7919

    async def watch() -> None:
        while not done.is_set():
            for peer in peers:
                rows = await backend.node_members(peer)
                views["samples"] += 1
                if any(r["id"] == target and not r["up"] for r in rows):
                    views["marked_down"] += 1
            await trio.sleep(POLL)

    async def run_compaction() -> None:
        started = time.perf_counter()
        try:
            await backend.rpc(target, "compact", 600.0)
        except Exception as exc:
            compaction.update(ok=False, error=str(exc))
        compaction["seconds"] = round(time.perf_counter() - started, 3)
        done.set()

    async with trio.open_nursery() as nursery:
        for worker in range(concurrency):
            nursery.start_soon(gets, worker)
        nursery.start_soon(watch)
        if compact is not None:
            nursery.start_soon(run_compaction)
        else:
            await trio.sleep(seconds)
            done.set()
    latencies.sort()

    def pct(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2) if latencies else 0.0

    return {
        "gets": len(latencies),
        "errors": errors,
        "p50_ms": pct(0.5),
        "p99_ms": pct(0.99),
        "max_ms": pct(1.0),
        **views,
    }, compaction
