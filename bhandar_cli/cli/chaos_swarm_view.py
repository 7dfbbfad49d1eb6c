"""`bhandar chaos --swarm`: a swarm's progress, its failing seeds and its tally on the terminal.

`cli/chaos_cmd.py` validates the options and calls `run_swarm_command`; the seeds run in
`bhandar_cli/sim/chaos/swarm.py`. On a terminal a rich progress bar runs while failing seeds print above
it; piped, there is no bar: one line per failing seed as it finishes, then the tally. With
`-o json`, one object at the end. Exit 0 only if every seed ran and passed; 1 if any failed; 130
if Ctrl-C stopped the swarm before any failed (as typer answers a Ctrl-C elsewhere, and `demo`).
With `--scheduler` the seeds run on a Dask cluster and print the same; a cluster that cannot be
reached, or is lost mid-run (the tally so far, then the seeds not run), is one line and exit 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from bhandar_cli.cli.output import emit_json, fail
from bhandar_cli.client import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, OutputFormat
from bhandar_cli.core.model import count as counted

if TYPE_CHECKING:
    from bhandar_cli.sim import DaskPool
    from bhandar_cli.sim.chaos import ChaosOptions, SeedOutcome, SwarmResult


def run_swarm_command(
    base: ChaosOptions,
    count: int,
    jobs: int,
    seed_timeout: float,
    output: OutputFormat,
    scheduler: str | None = None,
) -> None:
    """Run and print the swarm: on `jobs` worker processes here, or on the Dask cluster of
    `scheduler` (its worker threads then stand for `jobs`)."""
    if scheduler is None:
        _run_and_print(base, count, min(jobs, count), seed_timeout, output, None)
        return
    from bhandar_cli.sim import DaskPool, DaskUnavailable

    try:
        dask = DaskPool(scheduler)
    except DaskUnavailable as e:
        fail(str(e), EXIT_USAGE)
    with dask:
        _run_and_print(base, count, dask.threads(), seed_timeout, output, dask)


def _run_and_print(
    base: ChaosOptions,
    count: int,
    jobs: int,
    seed_timeout: float,
    output: OutputFormat,
    dask: DaskPool | None,
) -> None:
    from bhandar_cli.sim.chaos import swarm_json

    if output is OutputFormat.json:
        result = _run(base, count, jobs, seed_timeout, None, dask)
        emit_json(swarm_json(result))
    else:
        _write(_header(base, count, jobs, dask))
        if sys.stdout.isatty():
            result = _with_progress_bar(base, count, jobs, seed_timeout, dask)
        else:
            result = _run(base, count, jobs, seed_timeout, lambda o: _write(_failure(o)), dask)
        _write(_tally(result))
    if result.lost is not None:
        fail(result.lost, EXIT_USAGE)
    if result.failed:
        raise typer.Exit(EXIT_FAILED)
    if result.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)


def _run(
    base: ChaosOptions,
    count: int,
    jobs: int,
    seed_timeout: float,
    on_outcome: Callable[[SeedOutcome], None] | None,
    dask: DaskPool | None,
) -> SwarmResult:
    from bhandar_cli.sim.chaos import run_swarm

    if dask is None:  # the local swarm's call, as tests that stand in for run_swarm expect it
        return run_swarm(base, count, jobs, seed_timeout, on_outcome)
    return run_swarm(base, count, jobs, seed_timeout, on_outcome, dask)


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _header(base: ChaosOptions, count: int, jobs: int, dask: DaskPool | None) -> str:
    last = base.seed + count - 1
    where = counted(jobs, "worker")
    if dask is not None:
        where = f"the Dask cluster at {dask.address} ({counted(jobs, 'worker thread')})"
    return f"chaos swarm: {count} seeds, {base.seed} to {last}, on {where}\n"


def _failure(outcome: SeedOutcome) -> str:
    """Two lines for a failing seed (nothing for one that passed): why, and how to replay it."""
    if outcome.passed:
        return ""
    more = f" (+{outcome.violations - 1} more)" if outcome.violations > 1 else ""
    return f"FAILED seed {outcome.seed}: {outcome.violation}{more}\n  replay: {outcome.command}\n"


def _tally(result: SwarmResult) -> str:
    from bhandar_cli.sim.chaos import swarm_command

    done = len(result.outcomes)
    failed = result.failed
    head = f"{done} seeds"
    if result.interrupted:
        head = f"interrupted after {done} of {result.count} seeds"
    elif result.lost is not None:
        head = f"cut short after {done} of {result.count} seeds"
    lines = [f"swarm: {head}: {result.passed} passed, {len(failed)} failed in {result.seconds:.1f} s"]
    lines.append(f"puts stored twice (one request under two dots; goal 0): {result.stored_twice}")
    if failed:
        lines.append("failed seeds: " + " ".join(str(o.seed) for o in failed))
    lines.append(f"repeat with: {swarm_command(result)}")
    return "\n".join(lines) + "\n"


def _with_progress_bar(
    base: ChaosOptions, count: int, jobs: int, seed_timeout: float, dask: DaskPool | None
) -> SwarmResult:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    with Progress(
        TextColumn("swarm"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        transient=True,
    ) as progress:
        task = progress.add_task("seeds", total=count, failed=0)
        failures = 0

        def show(outcome: SeedOutcome) -> None:
            nonlocal failures
            if not outcome.passed:
                failures += 1
                # Text, not markup: a violation's text may hold brackets.
                progress.console.print(Text(_failure(outcome).rstrip("\n"), style="red"))
            progress.update(task, advance=1, failed=failures)

        on_outcome: Callable[[SeedOutcome], None] = show
        return _run(base, count, jobs, seed_timeout, on_outcome, dask)
