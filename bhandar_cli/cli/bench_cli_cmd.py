"""`bhandar bench cli`: its options and its table; the timing is bench/cli_bench.py's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail, fail_json
from bhandar_cli.client import EXIT_USAGE, OutputFormat

# The modules a one-shot command runs (launch.py reads the line, oneshot.py runs it), by path: the
# bench measures whether their bytecode is cached, it does not run them in this process.
LEAN_PATH = (Path(__file__).with_name("launch.py"), Path(__file__).with_name("oneshot.py"))


def bench_cli(
    cluster: str | None = typer.Option(
        None, "--cluster", metavar="DIR", help="The running process cluster (./.bhandar, $BHANDAR_CLUSTER)."
    ),
    runs: int = typer.Option(20, "--runs", help="Invocations of each command."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Time one-shot get and put (median, p90) beside `python -c pass` measured in the same run."""
    from bhandar_cli.fleet import ClusterFileError, load_running, resolve_dir

    if not 1 <= runs <= 10_000:
        fail(f"--runs must be 1..10000 (got {runs})", EXIT_USAGE)
    try:
        running = load_running(resolve_dir(cluster))
    except ClusterFileError as exc:
        fail_json("bench cli", output, str(exc), "no_cluster")
    from bhandar_cli.bench import run_cli_bench

    report = run_cli_bench(running.dir, len(running.nodes), runs, LEAN_PATH)
    if output is OutputFormat.json:
        emit_json(report)
    else:
        render(report)


def bytecode_cached() -> bool:
    """Whether the one-shot path's modules (launch.py and oneshot.py, beside this file) have current
    bytecode (bench/cli_bench.py says why it matters)."""
    from bhandar_cli.bench import bytecode_cached as cached

    return cached(LEAN_PATH)


def render(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 120)
    console.print(
        f"bench cli: {report['runs']} runs of each command, interleaved, on {report['nodes']} processes"
    )
    table = Table("command", "median ms", "p90 ms", "min ms", "over baseline ms", "CPU median ms", box=None)
    base = [str(report[f"baseline_{k}_ms"]) for k in ("median", "p90", "min")]
    table.add_row("python -c pass", *base, "", str(report["baseline_cpu_median_ms"]))
    for op, s in report["per_op"].items():
        shown = "put -o json" if op == "put" else "get -o raw"
        over = str(report["over_baseline_ms"][op])
        cpu = str(report["cpu_median_ms"][op])
        table.add_row(shown, str(s["median_ms"]), str(s["p90_ms"]), str(s["min_ms"]), over, cpu)
    console.print(table)
    if not report["bytecode_cached"]:
        import os

        import bhandar_cli

        package = os.path.dirname(bhandar_cli.__file__ or "bhandar_cli")
        console.print(
            "note: bhandar's bytecode is not cached (PYTHONDONTWRITEBYTECODE?), so every command "
            f"compiled its modules again; `python -m compileall -q {package}` caches it"
        )
    if report["errors"]:
        console.print(f"[red]{report['errors']} failed[/red]: {report['first_error']}")
