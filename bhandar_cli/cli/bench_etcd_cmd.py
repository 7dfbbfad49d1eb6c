"""`bhandar bench etcd`: the command and its table; the run itself is bench/etcd_side_by_side.py."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import typer

from bhandar_cli.bench import OPS, SIDES, etcd_binary, run_etcd_bench
from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_FAILED, EXIT_USAGE, OutputFormat


def etcd(
    ops: int = typer.Option(4_000, "--ops", help="Operations per round, side and operation."),
    rounds: int = typer.Option(3, "--rounds", help="Rounds; each runs both stores, alternating first."),
    clients: int = typer.Option(16, "--clients", help="Keep-alive HTTP clients."),
    http_workers: int = typer.Option(
        0,
        "--http-workers",
        metavar="N",
        help="Each node holds its HTTP connections in N front processes (`node run --http-workers`); "
        "their CPU counts as the node's, and the table says the node's own process's part.",
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Bhandar (3 TLS nodes, tokens, encryption at rest) beside a 3-member etcd, the same HTTP load."""
    from bhandar_cli.cli.cluster_cmd import run_async

    if not 100 <= ops <= 1_000_000 or not 1 <= rounds <= 20 or not 1 <= clients <= 256:
        fail("--ops must be 100..1000000, --rounds 1..20 and --clients 1..256", EXIT_USAGE)
    if not 0 <= http_workers <= 64:
        fail(f"--http-workers must be 0..64 (got {http_workers})", EXIT_USAGE)
    binary = etcd_binary()
    if binary is None:
        fail("bench etcd needs etcd installed (Debian: apt-get install etcd-server); none found", EXIT_FAILED)

    async def body() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="bhandar-bench-etcd-") as tmp:
            return await run_etcd_bench(Path(tmp), binary, ops, rounds, clients, http_workers)

    report = run_async("bench etcd", output, body)
    if output is OutputFormat.json:
        emit_json(report)
    else:
        render(report)


def render(rep: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"bench etcd: etcd {rep['etcd_version']} (3 members, plain HTTP) beside Bhandar (3 nodes, TLS, "
        f"tokens, encryption at rest; hot path {rep['hot_path']}; {_fronts(rep)}); {rep['clients']} "
        "keep-alive clients, "
        f"{rep['value_bytes']}-byte values, {rep['rounds']} rounds of {rep['ops_per_round']} ops each "
        "(medians)"
    )
    table = Table(
        "op",
        "store",
        "ops/s",
        "p99 ms",
        "server CPU µs/op",
        "each round ops/s",
        box=None,
        title_justify="left",
    )
    for op in OPS:
        for side in SIDES:
            s = rep[side][op]
            table.add_row(
                op,
                side,
                f"{s['ops_per_s']:.0f}",
                f"{s['p99_ms']:.1f}",
                f"{s['cpu_us_per_op']:.0f}" + _node_share(rep, side, s),
                ", ".join(f"{x:.0f}" for x in s["rounds_ops_per_s"]),
            )
        r = rep["ratio"][op]
        table.add_row(
            op,
            "bhandar / etcd",
            f"{r['ops']:.2f}",
            f"{r['p99']:.2f}",
            f"{r['cpu_per_op']:.2f}",
            "",
            style="bold",
        )
    console.print(table)
    if rep["errors"]:
        first = next(rep[s][o]["first_error"] for s in SIDES for o in OPS if rep[s][o]["first_error"])
        console.print(f"[yellow]{rep['errors']} requests failed; the first: {first}[/yellow]")


def _fronts(rep: dict[str, Any]) -> str:
    workers = rep.get("http_workers", 0)
    return f"{workers} HTTP front processes per node" if workers else "HTTP in each node's process"


def _node_share(rep: dict[str, Any], side: str, figures: dict[str, Any]) -> str:
    """With HTTP fronts, the part of a node's CPU per operation its own process spent."""
    if side != "bhandar" or not rep.get("http_workers") or "own_cpu_us_per_op" not in figures:
        return ""
    return f" (node {figures['own_cpu_us_per_op']:.0f})"
