"""`bhandar bench security`: what TLS and tokens cost, measured against the same cluster without them.

Two process clusters of the same shape run side by side in a temporary directory: a secure one
(mutual TLS between nodes, TLS and a token for clients: what `cluster up` makes) and an
`--insecure` one (plain TCP, no tokens). The same load (bench's get/put mix through client/client.py)
runs against each in turn, alternating which goes first over the rounds, so a noisy machine
weighs on both alike; the report gives each side's best round and the secure/plain ratio.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import typer

from bhandar_cli.cli.bench_cmd import (
    CONCURRENCY_OPTION,
    CONSISTENCY_OPTION,
    KEYSPACE,
    MIX_OPTION,
    VALUE,
    _progress,
    _store_load,
    load_shape,
)
from bhandar_cli.cli.output import EXIT_USAGE, OUTPUT_OPTION, OutputFormat, emit_json, fail

SIDES = ("secure", "plain")


def security(
    nodes: int = typer.Option(3, "--nodes", help="Nodes in each of the two clusters."),
    ops: int = typer.Option(5_000, "--ops", help="Operations per round and side."),
    rounds: int = typer.Option(2, "--rounds", help="Rounds; each runs both sides, alternating first."),
    concurrency: int = CONCURRENCY_OPTION,
    consistency: str = CONSISTENCY_OPTION,
    mix: str = MIX_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """The same load against a secure cluster (TLS, tokens) and a plain one, in one run, side by side."""
    from bhandar_cli.cli.cluster_cmd import run_async

    if not 1 <= nodes <= 9 or not 1 <= ops <= 1_000_000 or not 1 <= rounds <= 20:
        fail("--nodes must be 1..9, --ops 1..1000000 and --rounds 1..20", EXIT_USAGE)
    level, weights = load_shape(concurrency, consistency, mix)

    async def body() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="bhandar-bench-security-") as tmp:
            return await run_security_bench(Path(tmp), nodes, ops, rounds, concurrency, level, weights)

    report = run_async("bench security", output, body)
    if output is OutputFormat.json:
        emit_json(report)
    else:
        render(report)


async def run_security_bench(
    workdir: Path, nodes: int, ops: int, rounds: int, concurrency: int, level: str, weights: tuple[int, int]
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
        with _progress(2 * rounds * ops) as advance:
            for r in range(rounds):
                for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                    async with open_tcp_client(clusters[side].dir, level) as client:
                        runs[side].append(
                            await _store_load(client, ops, concurrency, weights, value, ctype, advance)
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


def render(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"bench security: two {report['nodes']}-node process clusters, {report['consistency']}, "
        f"{report['concurrency']} clients, {report['rounds']} rounds of {report['ops_per_round']} ops each"
    )
    table = Table("cluster", "TLS", "token", "ops/s (best)", "p50 ms", "p99 ms", "each round", box=None)
    for side in SIDES:
        s = report[side]
        table.add_row(
            side,
            "yes" if s["tls"] else "no",
            "yes" if s["token"] else "no",
            f"{s['ops_per_s']:.0f}",
            f"{s['p50_ms']:.2f}",
            f"{s['p99_ms']:.2f}",
            ", ".join(f"{x:.0f}" for x in s["rounds_ops_per_s"]),
        )
    console.print(table)
    console.print(
        f"secure / plain throughput: [bold]{report['ratio']:.2f}[/bold] "
        f"(security costs {report['cost_pct']:.1f}% of throughput)"
    )
    if report["errors"]:
        console.print(f"[yellow]{report['errors']} operations failed[/yellow]")
