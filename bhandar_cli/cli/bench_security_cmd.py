"""`bhandar bench security`: its options and its output; the bench is bench/security_bench.py's."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import typer

from bhandar_cli.cli.bench_cmd import CONCURRENCY_OPTION, CONSISTENCY_OPTION, MIX_OPTION, load_shape
from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_USAGE, OutputFormat


def security(
    nodes: int = typer.Option(3, "--nodes", help="Nodes in each of the two clusters."),
    ops: int = typer.Option(5_000, "--ops", help="Operations per round and side."),
    rounds: int = typer.Option(2, "--rounds", help="Rounds; each runs both sides, alternating first."),
    concurrency: int = CONCURRENCY_OPTION,
    consistency: str = CONSISTENCY_OPTION,
    mix: str = MIX_OPTION,
    floods: bool = typer.Option(
        False,
        "--floods",
        help="Instead: a legitimate client's 30 calls under a flood of 60 silent connections a second "
        "to the HTTPS port, then under 1024 connections held with a read-only token on the node port.",
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """The same load against a secure cluster (TLS, tokens) and a plain one, in one run, side by side."""
    from bhandar_cli.bench import run_flood_bench, run_security_bench
    from bhandar_cli.cli.bench_render import ProgressBar
    from bhandar_cli.cli.cluster_cmd import run_async

    if floods:

        async def flood_body() -> dict[str, Any]:
            with tempfile.TemporaryDirectory(prefix="bhandar-bench-floods-") as tmp:
                return await run_flood_bench(Path(tmp), ProgressBar)

        flood_report = run_async("bench security", output, flood_body)
        if output is OutputFormat.json:
            emit_json(flood_report)
        else:
            render_floods(flood_report)
        return

    if not 1 <= nodes <= 9 or not 1 <= ops <= 1_000_000 or not 1 <= rounds <= 20:
        fail("--nodes must be 1..9, --ops 1..1000000 and --rounds 1..20", EXIT_USAGE)
    level, weights = load_shape(concurrency, consistency, mix)

    async def body() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="bhandar-bench-security-") as tmp:
            return await run_security_bench(
                Path(tmp), nodes, ops, rounds, concurrency, level, weights, ProgressBar
            )

    report = run_async("bench security", output, body)
    if output is OutputFormat.json:
        emit_json(report)
    else:
        render(report)


def render(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from bhandar_cli.bench import SECURITY_SIDES

    console = Console()
    console.print(
        f"bench security: two {report['nodes']}-node process clusters, {report['consistency']}, "
        f"{report['concurrency']} clients, {report['rounds']} rounds of {report['ops_per_round']} ops each"
    )
    table = Table("cluster", "TLS", "token", "ops/s (best)", "p50 ms", "p99 ms", "each round", box=None)
    for side in SECURITY_SIDES:
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


def render_floods(report: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    https, node_port, calls = report["https"], report["node_port"], report["legit_calls"]
    console.print(
        f"HTTPS port, {https['flood_per_s']} new silent connections a second "
        f"({https['flood_opened']} opened): legitimate calls answered {https['answered']}/{calls}"
    )
    held = node_port["connections"]
    console.print(
        f"node port, {node_port['held']} connections with a read-only token "
        f"({node_port['flood_opened']} opened, {held.get('busiest_token', '?')} admitted): "
        f"legitimate calls answered {node_port['answered']}/{calls}"
    )
    console.print(f"one more with that token: {node_port['one_more_with_the_token']}")
    if not report["ok"]:
        console.print("[yellow]fewer than all but one of the legitimate calls were answered[/yellow]")
