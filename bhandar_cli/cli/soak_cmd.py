"""`bhandar soak`: parsing, the live progress view and the rendering of the verdict.

The soak itself (load, faults, heal, check) is soak/run.py.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import typer

from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_FAILED, EXIT_USAGE, OutputFormat

REFRESH = 0.5  # seconds between redraws of the live view


def soak(
    minutes: float = typer.Option(None, "--minutes", "-m", help="How long the load and faults run."),
    seconds: float = typer.Option(None, "--seconds", help="The same in seconds (for short runs)."),
    directory: str = typer.Option(
        None,
        "--cluster",
        "--dir",
        metavar="DIR",
        help="A running process cluster (default: a fresh 5-node one in a temporary directory).",
    ),
    seed: int = typer.Option(1, "--seed", help="Seed of the workload and the fault schedule."),
    clients: int = typer.Option(8, "--clients", "-c", help="Concurrent clients."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Run a mixed load against a process cluster while nodes crash and restart, the network
    splits and heals, a node joins and one leaves; then heal, wait for convergence and check that
    nothing acknowledged was lost and every replica agrees. Exit 1 if not (violations listed)."""
    if (minutes is None) == (seconds is None):
        fail("give the duration with --minutes M or --seconds S", EXIT_USAGE)
    duration = seconds if seconds is not None else minutes * 60.0
    if not 1.0 <= duration <= 24 * 3600:
        fail("the soak lasts between 1 second and 24 hours", EXIT_USAGE)
    if not 1 <= clients <= 256:
        fail(f"--clients must be between 1 and 256 (got {clients})", EXIT_USAGE)
    from bhandar_cli.cli.cluster_cmd import run_async
    from bhandar_cli.client import open_tcp_client
    from bhandar_cli.soak import SoakOptions, SoakProgress, own_cluster, run_soak

    options = SoakOptions(duration, seed, clients)
    progress = SoakProgress()
    live = output is OutputFormat.table and sys.stdout.isatty()
    own: list[Path] = []

    async def on(where: str | Path) -> dict[str, Any]:
        import trio

        async with open_tcp_client(where) as client, trio.open_nursery() as nursery:
            if live:
                nursery.start_soon(show_live, progress)
            summary = await run_soak(client, options, progress)
            nursery.cancel_scope.cancel()
            return summary

    async def body() -> dict[str, Any]:
        if directory is not None:
            return await on(directory)
        async with own_cluster() as where:
            own.append(where)
            return await on(where)

    summary: dict[str, Any] = run_async("soak", output, body)
    if own and summary["ok"]:
        shutil.rmtree(own[0].parent, ignore_errors=True)
    elif own:
        summary["kept"] = str(own[0])  # the logs of a failed soak's own cluster
    if output is OutputFormat.json:
        emit_json(summary)
    else:
        render(summary)
    if not summary["ok"]:
        raise typer.Exit(EXIT_FAILED)


async def show_live(progress: Any) -> None:
    """Elapsed time, ops/s, availability, faults so far and the last one, redrawn until cancelled."""
    import trio
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    with Live(console=Console(), auto_refresh=False, transient=True) as view:
        while True:
            # Text, not markup: a fault's description is shown as it is.
            view.update(Text(live_line(progress, trio.current_time()), no_wrap=True), refresh=True)
            await trio.sleep(REFRESH)


def live_line(progress: Any, now: float) -> str:
    stats, faults = progress.stats, progress.faults
    elapsed = max(now - progress.started, 1e-9) if progress.started else 0.0
    rate = stats.total / elapsed if elapsed else 0.0
    availability = stats.acknowledged / stats.total if stats.total else 1.0
    injected = sum(faults.counts.values())
    return (
        f"{progress.phase}  {elapsed:6.0f} s  {stats.total} ops ({rate:.0f}/s)  "
        f"available {100 * availability:.1f}%  faults {injected}  last: {faults.last or '-'}"
    )


def render(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 120)
    ops = Table("operation", "acknowledged", "failed", "unknown", box=None, title_justify="left")
    for kind, counts in summary["operations"]["by_kind"].items():
        ops.add_row(kind, str(counts["acknowledged"]), str(counts["failed"]), str(counts["unknown"]))
    console.print(ops)
    lat = summary["latency_ms"]
    faults = ", ".join(f"{k} {n}" for k, n in summary["faults"].items()) or "none"
    console.print(
        f"{summary['operations']['total']} operations ({summary['operations']['ops_per_s']}/s), "
        f"availability {100 * summary['availability']:.2f}%, p50 {lat['p50']} ms, p99 {lat['p99']} ms"
    )
    console.print(f"faults: {faults}")
    for error in summary["fault_errors"]:
        console.print(f"[yellow]fault not carried out: {error}[/yellow]")
    converged = "converged" if summary["converged"] else "NOT converged"
    console.print(f"{converged} in {summary['convergence_s']} s; {len(summary['lost_writes'])} lost writes")
    for problem in summary["not_converged"][:10]:
        console.print(f"[red]{problem}[/red]")
    for violation in summary["violations"]:
        console.print(f"[red]{violation}[/red]")
    if "kept" in summary:
        console.print(f"cluster kept for its logs: {summary['kept']}")
    console.print("[green]ok[/green]" if summary["ok"] else "[bold red]FAILED[/bold red]")
