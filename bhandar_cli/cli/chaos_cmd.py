"""`bhandar chaos`: a seeded workload under faults against the simulated store, then the checker.

This module only parses options, shows progress and prints; the options of a run are checked in
`bhandar_cli/sim/chaos/chaos_options.py` and the run itself is in `bhandar_cli/sim/chaos/chaos_run.py`
(both imported inside the command so `bhandar --help` stays fast).
Register it with `app.command("chaos")(chaos)`. `--swarm N` runs N seeds in worker processes
instead of one: `sim/chaos/swarm.py` runs them and `cli/chaos_swarm_view.py` prints them, after the same
validation as a single run, so every failing seed's replay command is a valid `--seed` run.

Output: a summary whose every line depends only on the seed and options, then one line of real-time
figures (the only line that differs between two runs of the same seed), with a bare event loop's
events/s measured around the run for comparison and the run's CPU time per operation and per event
(steadier than real time on a busy machine). With `-o json`, one object.
On any violation the violations and a `reproduce with: bhandar chaos ...` line go to standard error
and the exit code is 1. Numeric options are taken as text rather than typed as `int` so that every
bad value gives the same one-line error and exit code 2 (click would print a usage box).

Fault kinds include range movements (`join`, `decommission`); `--storage lsm` puts every node on
the LSM engine over a simulated disk that crashes can tear. `--bug` (hidden) plants a known bug,
so tests can show the checker catches it: `ack_before_quorum` in the store, `ack_before_sync` in
the simulator's driver (acknowledging before the store is synced; only storage faults expose it).
`--swarm N` validates the same options, then hands them to `cli/chaos_swarm_view.py`; with
`--scheduler tcp://HOST:PORT` its seeds run on that Dask cluster (sim/dask_pool.py) instead of
worker processes here.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_FAILED, EXIT_USAGE, OutputFormat
from bhandar_cli.core.model import LEVELS, BadInput, one_of

SCENARIOS = ("ministore",)
SHOWN_VIOLATIONS = 20
SWARM_MAX = 1_000_000
SWARM_OPTIONS = ("--swarm", "--start", "--jobs", "--seed-timeout", "--scheduler")
JOBS_MAX = 256
SEED_TIMEOUT = 300  # seconds; a seed of the default size takes one to a few
SEED_TIMEOUT_MAX = 86_400
BASELINE_SECONDS = 0.5  # real seconds of the bare event loop measured beside a run


@contextmanager
def _usage_errors() -> Iterator[None]:
    """An option the chaos run refuses (sim/chaos/chaos_options.py): one line and exit 2."""
    try:
        yield
    except BadInput as exc:
        fail(str(exc), EXIT_USAGE)


def _int(option: str, text: str | None, lo: int, hi: int) -> int | None:
    from bhandar_cli.sim.chaos import parse_int

    with _usage_errors():
        return parse_int(option, text, lo, hi)
    return None  # not reached: fail() raised


def chaos(
    seed: str = typer.Option(
        None, "--seed", metavar="INT", help="Seed of the run; a random one (printed) when not given."
    ),
    ops: str = typer.Option(
        None,
        "--ops",
        metavar="INT",
        help="Client operations, retries included (default: 2000; 8000 for ministore).",
    ),
    nodes: str = typer.Option(
        None,
        "--nodes",
        metavar="INT",
        help="Nodes in the cluster, 2 to 1000 (A ... Z, AA, AB, ...) (default: drawn, 3-7).",
    ),
    replicas: str = typer.Option(
        None,
        "--replicas",
        "-n",
        metavar="INT",
        help="Replication factor N (default: drawn, at most --nodes).",
    ),
    faults: str = typer.Option(
        None,
        "--faults",
        metavar="LIST",
        help="Faults to inject: all, none, or a comma-separated list of kill, restart, partition, clog, "
        "delay, loss, duplicate, join, decommission (default: a subset drawn from the seed).",
    ),
    storage: str = typer.Option(
        None,
        "--storage",
        metavar="KIND",
        help="memory, or lsm: every node on the LSM engine over a simulated disk that a crash can "
        "tear (unsynced writes lost) (default: drawn, mostly memory).",
    ),
    consistency: str = typer.Option(
        None,
        "--consistency",
        "-c",
        metavar="LEVEL",
        help=f"{one_of(LEVELS)} for every request (default: drawn).",
    ),
    keys: str = typer.Option(None, "--keys", metavar="INT", help="Keys per keyspace (default: drawn)."),
    clients: str = typer.Option(
        None, "--clients", metavar="INT", help="Concurrent clients (default: drawn)."
    ),
    scenario: str = typer.Option(
        None,
        "--scenario",
        metavar="NAME",
        help="Run a fixed experiment instead: ministore (strict vs sloppy quorum vs hinted handoff, "
        "on the real store).",
    ),
    swarm: str = typer.Option(
        None,
        "--swarm",
        metavar="INT",
        help="Run this many consecutive seeds (from --start) with the other options in worker "
        "processes instead of one, and print each failing seed with its first violation and the "
        "command that replays it; exit 1 if any failed. A seed whose run raises or outlives "
        "--seed-timeout fails too. Ctrl-C stops the workers and prints the tally so far (exit 130 "
        "if none had failed).",
    ),
    start: str = typer.Option(
        None, "--start", metavar="INT", help="First seed of a swarm (default: a random one, printed)."
    ),
    jobs: str = typer.Option(
        None, "--jobs", "-j", metavar="INT", help="Worker processes of a swarm (default: the CPU count)."
    ),
    seed_timeout: str = typer.Option(
        None,
        "--seed-timeout",
        metavar="SECONDS",
        help=f"A swarm seed still running after this long fails (default: {SEED_TIMEOUT}).",
    ),
    scheduler: str = typer.Option(
        None,
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="Run a swarm's seeds on the Dask cluster of this scheduler (started with `dask "
        "scheduler`, its workers with `dask worker`) instead of worker processes here; needs "
        "pip install 'bhandar[dask]'. The output and exit codes are a local swarm's.",
    ),
    hot: str = typer.Option(
        None,
        "--hot",
        metavar="FRACTION",
        help="Skew: this fraction of operations go to one key (e.g. 0.5); the summary "
        "shows the hot keys, their replicas and each node's replica load (default: 0, no extra skew).",
    ),
    report: str = typer.Option(
        None,
        "--report",
        metavar="FILE",
        help="Also write the run as a self-contained HTML timeline: faults as bands, operations per "
        "client, violations marked, and the command that replays the run at the top.",
    ),
    bug: list[str] = typer.Option([], "--bug", hidden=True, help="Test only: plant a store bug."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Run a seeded workload under faults on a simulated cluster and check that nothing acknowledged
    was lost, counters add up and replicas converge. The same seed replays the same run; --swarm runs
    many seeds in parallel."""
    from bhandar_cli.sim.chaos import SEED_MAX, options_from_flags, parse_fraction

    swarm_options = (swarm, start, jobs, seed_timeout, scheduler)
    with _usage_errors():
        hot_share = parse_fraction("--hot", hot)
    if report is not None:
        _check_report_path(report, scenario, swarm)
    if scenario is not None:
        if hot_share:
            fail("--hot does not apply to --scenario ministore (its setup is fixed)", EXIT_USAGE)
        _scenario(
            scenario,
            seed,
            ops,
            output,
            nodes,
            replicas,
            faults,
            consistency,
            keys,
            clients,
            storage,
            bug,
            *swarm_options,
        )
        return
    swarm_n = _int("--swarm", swarm, 1, SWARM_MAX)
    if swarm_n is None:
        for option, value in zip(SWARM_OPTIONS[1:], swarm_options[1:], strict=True):
            if value is not None:
                fail(f"{option} applies only with --swarm", EXIT_USAGE)
    elif seed is not None:
        fail("--seed and --swarm cannot be combined (a swarm starts at --start)", EXIT_USAGE)
    elif jobs is not None and scheduler is not None:
        fail("--jobs and --scheduler cannot be combined (the Dask workers run the seeds)", EXIT_USAGE)
    seed_n = _int("--seed", seed, 0, SEED_MAX)
    with _usage_errors():
        options = options_from_flags(
            seed=secrets.randbelow(2**32) if seed_n is None else seed_n,
            ops=ops,
            nodes=nodes,
            replicas=replicas,
            faults=faults,
            consistency=consistency,
            keys=keys,
            clients=clients,
            bugs=tuple(bug),
            storage=storage,
            hot=hot_share,
        )
    if swarm_n is not None:
        _swarm(options, swarm_n, start, jobs, seed_timeout, scheduler, output)
        return
    _print_report(_with_baseline(options, output, report), output)


def _check_report_path(path: str, scenario: str | None, swarm: str | None) -> None:
    if scenario is not None or swarm is not None:
        fail("--report applies to a single run (not --scenario or --swarm)", EXIT_USAGE)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or os.path.isdir(path):
        fail(f"--report {path}: no such directory, or a directory", EXIT_USAGE)


def _swarm(
    options: Any,
    count: int,
    start: str | None,
    jobs: str | None,
    timeout: str | None,
    scheduler: str | None,
    output: OutputFormat,
) -> None:
    from dataclasses import replace

    from bhandar_cli.cli.chaos_swarm_view import run_swarm_command
    from bhandar_cli.sim.chaos import SEED_MAX

    start_n = _int("--start", start, 0, SEED_MAX - count + 1)
    jobs_n = _int("--jobs", jobs, 1, JOBS_MAX)
    timeout_n = _int("--seed-timeout", timeout, 1, SEED_TIMEOUT_MAX)
    address = None
    if scheduler is not None:
        from bhandar_cli.sim import parse_scheduler

        with _usage_errors():
            address = parse_scheduler(scheduler)
    run_swarm_command(
        replace(options, seed=secrets.randbelow(2**32) if start_n is None else start_n),
        count,
        jobs_n if jobs_n is not None else os.cpu_count() or 1,
        SEED_TIMEOUT if timeout_n is None else timeout_n,
        output,
        address,
    )


def _run_with_progress(options: Any, output: OutputFormat, keep_history: bool = False) -> Any:
    from bhandar_cli.sim.chaos import run_chaos

    if output is not OutputFormat.table or not sys.stdout.isatty():
        return run_chaos(options, keep_history=keep_history)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn(f"chaos seed {options.seed}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    ) as progress:
        task = progress.add_task("ops", total=options.ops)
        return run_chaos(options, lambda done: progress.update(task, completed=done), keep_history)


def _with_baseline(options: Any, output: OutputFormat, html: str | None = None) -> Any:
    """The run's report with a bare event loop's speed measured in this process beside it: half
    just before the run and half just after, so that a machine whose load changes during the run
    weighs on both figures alike."""
    from dataclasses import replace

    from bhandar_cli.bench import bare_loop_rate

    before = bare_loop_rate(BASELINE_SECONDS / 2)
    report = _run_with_progress(options, output, keep_history=html is not None)
    after = bare_loop_rate(BASELINE_SECONDS / 2)
    report = replace(report, bare_loop_events_per_second=(before + after) / 2)
    if html is not None:
        from bhandar_cli.sim.chaos import render_html

        try:
            with open(html, "w", encoding="utf-8") as fh:
                fh.write(render_html(report))
        except OSError as exc:
            fail(f"--report {html}: {exc.strerror or exc}", EXIT_FAILED)
        sys.stderr.write(f"report written to {html}\n")
    return report


def _print_report(report: Any, output: OutputFormat) -> None:
    from bhandar_cli.sim.chaos import render_summary, render_timing, report_json, reproduce_command

    if output is OutputFormat.json:
        emit_json(report_json(report))
    else:
        sys.stdout.write(render_summary(report) + render_timing(report))
        sys.stdout.flush()
    if report.ok:
        return
    violations = report.check.violations
    for violation in violations[:SHOWN_VIOLATIONS]:
        sys.stderr.write(f"violation: {violation}\n")
    if len(violations) > SHOWN_VIOLATIONS:
        sys.stderr.write(f"... and {len(violations) - SHOWN_VIOLATIONS} more\n")
    sys.stderr.write(f"reproduce with: {reproduce_command(report.options)}\n")
    sys.stderr.flush()
    raise typer.Exit(EXIT_FAILED)


def _scenario(name: str, seed: str | None, ops: str | None, output: OutputFormat, *others: Any) -> None:
    if name.strip().lower() not in SCENARIOS:
        fail(f"unknown --scenario {name!r} (known: {', '.join(SCENARIOS)})", EXIT_USAGE)
    names = (
        "--nodes",
        "--replicas",
        "--faults",
        "--consistency",
        "--keys",
        "--clients",
        "--storage",
        "--bug",
        *SWARM_OPTIONS,
    )
    for option, value in zip(names, others, strict=True):
        if value:
            fail(f"{option} does not apply to --scenario ministore (its setup is fixed)", EXIT_USAGE)
    from bhandar_cli.sim.chaos import (
        DEFAULT_REQUESTS,
        DEFAULT_SEED,
        OPS_MAX,
        SEED_MAX,
        ministore_scenario_json,
        render_ministore_scenario,
        run_ministore_scenario,
    )

    seed_n = _int("--seed", seed, 0, SEED_MAX)
    ops_n = _int("--ops", ops, 1, OPS_MAX)
    result = run_ministore_scenario(
        DEFAULT_SEED if seed_n is None else seed_n, DEFAULT_REQUESTS if ops_n is None else ops_n
    )
    if output is OutputFormat.json:
        emit_json(ministore_scenario_json(result))
    else:
        sys.stdout.write(render_ministore_scenario(result))
        sys.stdout.flush()
