"""`bhandar bench repair`: its options and its output; the bench is bench/repair_bench.py's."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import typer

from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_USAGE, OutputFormat


def repair(
    keys: int = typer.Option(10_000, "--keys", help="Keys the isolated node misses."),
    nodes: int = typer.Option(5, "--nodes", help="Nodes in the cluster started for the run."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds to wait for convergence at most."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Partition one node away, write KEYS keys, heal, and time until every replica agrees; beside
    it, the time to send the same records to one node once."""
    from bhandar_cli.bench import run_repair_bench
    from bhandar_cli.cli.bench_render import ProgressBar
    from bhandar_cli.cli.cluster_cmd import run_async

    if not 1 <= keys <= 1_000_000 or not 3 <= nodes <= 9 or not 1 <= timeout <= 3600:
        fail("--keys must be 1..1000000, --nodes 3..9 and --timeout 1..3600", EXIT_USAGE)

    async def body() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="bhandar-bench-repair-") as tmp:
            return await run_repair_bench(Path(tmp), keys, nodes, timeout, ProgressBar)

    report = run_async("bench repair", output, body)
    if output is OutputFormat.json:
        emit_json(report)
    else:
        render(report)


def render(report: dict[str, Any]) -> None:
    print(
        f"bench repair: {report['nodes']} process nodes, {report['keys']} keys written at ONE while "
        f"{report['isolated']} was partitioned away ({report['write_s']} s)"
    )
    state = "converged" if report["converged"] else "NOT converged"
    print(f"  {state} {report['converge_s']} s after the heal")
    print(f"  the same records sent once to one node: {report['stream_s']} s")
    print(f"  repair / stream: {report['ratio']:.2f}")
    print(
        f"  {report['hints_delivered']} hints delivered, {report['keys_repaired']} keys repaired by "
        f"anti-entropy in {report['repair_sessions']} comparisons"
    )
    for problem in report["not_converged"]:
        print(f"  still differing: {problem}")
    if report["errors"]:
        print(f"  {report['errors']} writes failed")
