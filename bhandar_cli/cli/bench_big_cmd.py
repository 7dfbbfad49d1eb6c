"""`bhandar bench big`: its options and its output; the bench is bench/big_values.py's."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import typer

from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_FAILED, EXIT_USAGE, OutputFormat


def big(
    values: int = typer.Option(8, "--big", metavar="N", help="Values at the size limit per phase."),
    nodes: int = typer.Option(
        4, "--nodes", help="Nodes in the cluster started for the run (4: a fallback for hints)."
    ),
    seconds: float = typer.Option(5.0, "--seconds", help="Length of the baseline phase."),
    concurrency: int = typer.Option(4, "--concurrency", help="Small-request workers."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Small QUORUM requests' p99 with and without values at the size limit being written, hinted
    and handed off, and repaired, in the same run on a process cluster started for it."""
    from bhandar_cli.bench import BigBench
    from bhandar_cli.cli.cluster_cmd import run_async

    if not 1 <= values <= 1000 or not 4 <= nodes <= 9 or not 0.5 <= seconds <= 600:
        fail("--big must be 1..1000, --nodes 4..9 and --seconds 0.5..600", EXIT_USAGE)
    if not 1 <= concurrency <= 64:
        fail("--concurrency must be 1..64", EXIT_USAGE)

    async def body() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="bhandar-bench-big-") as tmp:
            return await BigBench(values, seconds, concurrency).run(Path(tmp), nodes)

    report = run_async("bench big", output, body)
    if output is OutputFormat.json:
        emit_json(report)
    else:
        render(report)
    if not report["ok"]:
        why = "a value not replicated, handed off or repaired, or a live node seen down"
        fail(f"bench big: {why}", EXIT_FAILED)


def render(report: dict[str, Any]) -> None:
    mib = report["value_bytes"] / (1 << 20)
    print(
        f"bench big: {report['nodes']} process nodes, {report['big_values']} values of {mib:g} MiB "
        f"(the size limit) while small QUORUM gets and puts run"
    )
    for phase, s in report["small"].items():
        ratio = f" ({s['p99_over_baseline']}x the baseline)" if s.get("p99_over_baseline") else ""
        speed = report["big_mb_per_s"].get(phase)
        big = f"; big values at {speed} MB/s" if speed else ""
        print(
            f"  {phase:9} small: {s['count']} requests, {s['errors']} failed, p50 {s['p50_ms']} ms, "
            f"p99 {s['p99_ms']} ms{ratio} (gets only: p99 {s['get_p99_ms']} ms){big}"
        )
    print(
        f"  a big value read whole from {report['replicas_holding_big_value']} replicas; "
        f"{report['hints_held']} hints held for {report['stopped_node']} and "
        f"{report['hints_handed_off']} handed off; {report['big_values_repaired']} of the values it "
        f"missed held whole after the repair ({report['keys_repaired']} keys repaired by the call)"
    )
    downs = report["false_downs"]
    print(f"  live nodes seen down by a live peer: {len(downs)}" + (f" ({downs[0]}, ...)" if downs else ""))
    if report["first_error"]:
        print(f"  first small-request error: {report['first_error']}")
