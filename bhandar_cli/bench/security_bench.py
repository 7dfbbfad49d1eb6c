"""`bhandar bench security`: what TLS and tokens cost, measured against the same cluster without them.

Two process clusters of the same shape run side by side in a temporary directory: a secure one
(mutual TLS between nodes, TLS and a token for clients: what `cluster up` makes) and an
`--insecure` one (plain TCP, no tokens). The same load (bench's get/put mix through client/client.py)
runs against each in turn, alternating which goes first over the rounds, so a noisy machine
weighs on both alike; the report gives each side's best round and the secure/plain ratio. The
command (cli/bench_security_cmd.py) parses and renders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bhandar_cli.bench.throughput import KEYSPACE, VALUE, Progress, no_progress, store_load

SIDES = ("secure", "plain")


async def run_security_bench(
    workdir: Path,
    nodes: int,
    ops: int,
    rounds: int,
    concurrency: int,
    level: str,
    weights: tuple[int, int],
    progress: Progress = no_progress,
) -> dict[str, Any]:
    from bhandar_cli.client.openers import open_tcp_client
    from bhandar_cli.core.model.values import parse_value_text
    from bhandar_cli.fleet import supervisor
    from bhandar_cli.fleet.cluster_file import ClusterFile

    parsed = parse_value_text(VALUE)
    value, ctype = parsed.data, parsed.ctype
    zones = min(3, nodes)
    replicas = min(3, nodes)
    clusters: dict[str, ClusterFile] = {}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    try:
        for side in SIDES:
            clusters[side] = await supervisor.up(
                workdir / side, nodes, zones, 0, 8, replicas, (), tls=side == "secure"
            )
        with progress(2 * rounds * ops) as advance:
            for r in range(rounds):
                for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                    async with open_tcp_client(clusters[side].dir, level) as client:
                        runs[side].append(
                            await store_load(client, ops, concurrency, weights, value, ctype, advance)
                        )
    finally:
        for cluster in clusters.values():
            await supervisor.down(cluster)
    best = {side: max(runs[side], key=lambda s: s["ops_per_s"]) for side in SIDES}
    secure, plain = best["secure"], best["plain"]
    ratio = round(secure["ops_per_s"] / plain["ops_per_s"], 3) if plain["ops_per_s"] else 0.0
    errors = sum(s["errors"] for side in SIDES for s in runs[side])
    sides: dict[str, Any] = {}
    for side in SIDES:
        cluster = clusters[side]
        sides[side] = {
            "tls": cluster.tls,
            "token": bool(cluster.token),
            "rounds_ops_per_s": [s["ops_per_s"] for s in runs[side]],
            **{k: best[side][k] for k in ("ops_per_s", "p50_ms", "p99_ms", "max_ms")},
        }
    return {
        "cmd": "bench security",
        "ok": errors == 0,
        "nodes": nodes,
        "keyspace": KEYSPACE,
        "consistency": level,
        "concurrency": concurrency,
        "ops_per_round": ops,
        "rounds": rounds,
        "errors": errors,
        **sides,
        "ratio": ratio,
        "cost_pct": round((1 - ratio) * 100, 1),
    }
