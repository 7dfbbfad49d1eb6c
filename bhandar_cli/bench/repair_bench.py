"""`bhandar bench repair`: how long replicas take to agree again after a partition, beside the time
to send the same records once.

On a fresh process cluster started here (and stopped at the end), one node is isolated, N keys
are written at ONE through the majority side so the isolated replica misses its share, then the
partition heals and the clock runs until every replica of every range agrees (the `wait
converged` check: hints delivered, range hashes equal). Beside it, in the same run and on the
same cluster, the same N records are sent to one node in bulk at ONE (it stores them and
replicates them once through the replica-write path): the cost of moving the data once, which
repair is measured against. The command (cli/bench_repair_cmd.py) parses and renders.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bhandar_cli.bench.throughput import VALUE, Progress, no_progress

KEYSPACE = "bench_repair"
STREAM_KEYSPACE = "bench_stream"
CONCURRENCY = 32


async def run_repair_bench(
    workdir: Path, keys: int, nodes: int, timeout: float, progress: Progress = no_progress
) -> dict[str, Any]:
    import trio

    from bhandar_cli.bench.echo_baselines import run_load
    from bhandar_cli.client import open_tcp_client
    from bhandar_cli.core.model import parse_value_text
    from bhandar_cli.fleet import down, up

    parsed = parse_value_text(VALUE)
    value, ctype = parsed.data, parsed.ctype
    cluster = await up(workdir, nodes, min(3, nodes), 0, 8, 3)
    try:
        async with open_tcp_client(cluster.dir, "ONE") as client:
            names = list(client.backend.names)
            isolated, majority = names[-1], names[:-1]
            await client.admin.keyspace_create(KEYSPACE)
            await client.admin.keyspace_create(STREAM_KEYSPACE)

            async def write(keyspace: str, via: list[str], advance: Any) -> tuple[float, int]:
                async def one(worker: int, i: int) -> str:
                    await client.data.put(keyspace, f"k{i}", value, ctype, "none", "ONE", via[i % len(via)])
                    return "put"

                result = await run_load(keys, CONCURRENCY, one, advance)
                return result.seconds, sum(s.errors for s in result.ops.values())

            with progress(2 * keys) as advance:
                await client.admin.partition([[isolated], majority])
                write_s, write_errors = await write(KEYSPACE, majority, advance)
                await client.admin.heal()
                healed = time.perf_counter()
                problems: list[str] = ["not checked"]
                with trio.move_on_after(timeout):
                    while problems := await client.backend.convergence_problems():
                        await trio.sleep(0.1)
                converge_s = time.perf_counter() - healed
                # The same records once more, all to one node, on the healed cluster.
                stream_s, stream_errors = await write(STREAM_KEYSPACE, majority[:1], advance)
            metrics = [await client.backend.node_metrics(n) for n in names]
    finally:
        await down(cluster)
    converged = not problems
    # The ratio of the figures shown, so the JSON is consistent with itself.
    converge_s, stream_s = round(converge_s, 3), round(stream_s, 3)
    return {
        "cmd": "bench repair",
        "ok": converged and not write_errors and not stream_errors,
        "nodes": nodes,
        "keys": keys,
        "isolated": isolated,
        "write_s": round(write_s, 3),
        "errors": write_errors + stream_errors,
        "converged": converged,
        "converge_s": converge_s,
        "stream_s": stream_s,
        "ratio": round(converge_s / stream_s, 3) if stream_s else 0.0,
        "hints_delivered": sum(m.hints_delivered for m in metrics),
        "keys_repaired": sum(m.keys_repaired for m in metrics),
        "repair_sessions": sum(m.repair_sessions for m in metrics),
        "not_converged": problems[:10],
    }
