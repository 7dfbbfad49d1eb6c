"""`bhandar check`: run anyone's nodes (Maelstrom's protocol) under Bhandar's faults and checkers.

Parses and validates the options, runs the check (check/check_run.py) or the checklist, and prints
the report (check/check_report.py, --report's page from check/html.py). Exit 0 valid, 1 invalid or
unknown, 2 a usage, setup or protocol error. `--sweep N` runs the same check with N consecutive
seeds (check/sweep.py), here or on a Dask cluster (`--scheduler`), and prints one line per seed:
its verdict and the command that repeats it; exit 2 if any could not be judged, else 1 if any was
invalid or unknown.
"""

from __future__ import annotations

import random
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from bhandar_cli.check import CONSISTENCY_MODELS, KINDS, WORKLOADS, scenarios
from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_USAGE, OutputFormat
from bhandar_cli.core.model import count as counted
from bhandar_cli.core.model import seconds_of
from bhandar_cli.host import DISTRIBUTIONS

if TYPE_CHECKING:
    from bhandar_cli.check import CheckOptions, SweepResult, SweepSeed

WORKLOAD_HELP = "; ".join(f"{name}: {doc}" for name, doc in WORKLOADS.items())


def _seconds(option: str, text: str, low: float, high: float) -> float:
    value = seconds_of(text)
    if value is None or not low <= value <= high:
        fail(
            f"{option} takes a duration from {low:g} s to {high:g} s such as 500ms, 5s or 2m (got {text!r})",
            EXIT_USAGE,
        )
    return value


def _availability(text: str) -> float:
    if text.strip().lower() == "total":
        return 1.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        fail(f"--availability takes total or a fraction from 0 to 1 such as 0.99 (got {text!r})", EXIT_USAGE)
    return value


def check(
    program: str = typer.Option(
        ...,
        "--bin",
        metavar="PROGRAM",
        help="The node program; quote it with its arguments ('bhandar node maelstrom').",
    ),
    args: list[str] | None = typer.Argument(
        None, metavar="[ARG]...", help="More arguments for the program (after --)."
    ),
    workload: str = typer.Option(
        ..., "--workload", "-w", metavar="NAME", help=f"What clients do and what is checked. {WORKLOAD_HELP}."
    ),
    node_count: int = typer.Option(3, "--node-count", help="Copies of the program to run (n0, n1, ...)."),
    concurrency: int | None = typer.Option(
        None, "--concurrency", help="Clients (c1, c2, ...); default: one per node."
    ),
    rate: float = typer.Option(20.0, "--rate", help="Operations per second, all clients together."),
    time_limit: str = typer.Option(
        "5s", "--time-limit", metavar="DURATION", help="How long the clients run."
    ),
    latency: str = typer.Option(
        "0ms",
        "--latency",
        metavar="DURATION",
        help="Mean latency of every message between nodes or to a service (clients' take none, as "
        "in Maelstrom; see --latency-dist).",
    ),
    latency_dist: str = typer.Option(
        "constant",
        "--latency-dist",
        metavar="SHAPE",
        help="The latency's distribution around its mean, as Maelstrom's: constant (every message "
        "takes --latency), uniform (0 to twice it) or exponential.",
    ),
    seed: int | None = typer.Option(
        None, "--seed", help="Draws the faults and the workload (printed: repeat a run)."
    ),
    sweep: str | None = typer.Option(
        None,
        "--sweep",
        metavar="INT",
        help="Run the same check with this many consecutive seeds (from --start), each in its own "
        "log directory (--log-dir/seed-N), and print one line per seed: its verdict and the command "
        "that repeats it. Exit 0 if all were valid, 1 if any was invalid or unknown, 2 if any could "
        "not be judged.",
    ),
    start: str | None = typer.Option(
        None, "--start", metavar="INT", help="First seed of a sweep (default: a random one, printed)."
    ),
    jobs: str | None = typer.Option(
        None,
        "--jobs",
        "-j",
        metavar="INT",
        help="Seeds of a sweep (default: 2), or scenarios of a checklist (default: 1), run at a time here.",
    ),
    scheduler: str | None = typer.Option(
        None,
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="Run a sweep's seeds on the Dask cluster of this scheduler (`dask scheduler`, `dask "
        "worker`): every worker needs bhandar and the --bin program at the same path; needs pip "
        "install 'bhandar[dask]'.",
    ),
    nemesis: str = typer.Option("", "--nemesis", metavar="KIND,...", help=f"Faults: {', '.join(KINDS)}."),
    nemesis_interval: str = typer.Option(
        "",
        "--nemesis-interval",
        metavar="DURATION",
        help="Typical fault length (default: a fifth of the time limit).",
    ),
    checklist: bool = typer.Option(
        False, "--checklist", help="Run every scenario of the workload (--scenario names them)."
    ),
    scenario: str = typer.Option(
        "",
        "--scenario",
        metavar="NAME",
        help="Run one checklist scenario, named as the workload names it (docs/check.md lists them).",
    ),
    report: Path | None = typer.Option(
        None, "--report", metavar="FILE", help="Write a self-contained HTML report."
    ),
    log_dir: str = typer.Option(
        "bhandar-check", "--log-dir", metavar="DIR", help="Node logs, their data, the history."
    ),
    op_timeout: str = typer.Option(
        "",
        "--timeout",
        metavar="DURATION",
        help="How long a client waits for an answer (default as Maelstrom's: 5s; lin-kv 1s, or ten "
        "times --latency if more).",
    ),
    recovery: str = typer.Option(
        "10s",
        "--recovery",
        metavar="DURATION",
        help="Time after the heal before the final reads (Maelstrom waits 10s).",
    ),
    duplicate_clients: bool = typer.Option(
        False,
        "--duplicate-clients",
        help="The duplicate fault copies clients' requests too (by default, as in Maelstrom, only "
        "messages between nodes).",
    ),
    init_timeout: str = typer.Option(
        "10s", "--init-timeout", metavar="DURATION", help="How long a node may take to answer init."
    ),
    flood_limit: int = typer.Option(
        10_000, "--flood-limit", help="Messages one node may write in one second."
    ),
    availability: str = typer.Option(
        "",
        "--availability",
        metavar="total|FRACTION",
        help="Operations that must succeed: total (every one) or a share from 0 to 1 (default: none).",
    ),
    consistency_models: str = typer.Option(
        "",
        "--consistency-models",
        metavar="MODEL,...",
        help=(
            "txn-rw-register and txn-list-append: the models the history must satisfy (default "
            f"strict-serializable); anomalies they allow are only reported. {', '.join(CONSISTENCY_MODELS)}."
        ),
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Check a store you did not write: start --node-count copies of any program that speaks
    Maelstrom's protocol (JSON messages on standard input and output), route every message between
    them through Bhandar's network model with the faults of --nemesis, drive clients at --rate and
    judge what they saw with the workload's checker.

    Exit 0 valid; 1 invalid or unknown (with the operations that show it);
    2 a setup or protocol error (no such program, no init_ok, a malformed
    message, a flood)."""
    from bhandar_cli.check import CheckOptions, default_timeout

    sweep_count = _sweep_options(sweep, start, jobs, scheduler, seed, checklist, report)
    argv = [*shlex.split(program), *(args or [])]
    if not argv:
        fail("--bin needs a program", EXIT_USAGE)
    if workload not in WORKLOADS:
        fail(f"unknown workload {workload!r} (use {', '.join(WORKLOADS)})", EXIT_USAGE)
    kinds = tuple(k.strip() for k in nemesis.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        fail(f"--nemesis: unknown fault {unknown[0]!r} (use {', '.join(KINDS)})", EXIT_USAGE)
    if scenario and scenario not in scenarios(workload):
        known = "; ".join(scenarios(workload))
        fail(f"--scenario: unknown scenario {scenario!r} for {workload} (use {known})", EXIT_USAGE)
    if (checklist or scenario) and kinds:
        fail("--checklist and --scenario bring their own faults; leave out --nemesis", EXIT_USAGE)
    if not 1 <= node_count <= 64 or not 1 <= (concurrency or node_count) <= 1000:
        fail("--node-count must be 1..64 and --concurrency 1..1000", EXIT_USAGE)
    if not 0 < rate <= 100_000 or flood_limit < 1:
        fail("--rate must be above 0 and at most 100000, --flood-limit at least 1", EXIT_USAGE)
    models = tuple(m.strip() for m in consistency_models.split(",") if m.strip())
    unknown_models = [m for m in models if m not in CONSISTENCY_MODELS]
    if unknown_models:
        fail(
            f"--consistency-models: unknown model {unknown_models[0]!r} "
            f"(use {', '.join(CONSISTENCY_MODELS)})",
            EXIT_USAGE,
        )
    if consistency_models and (not models or not workload.startswith("txn-")):
        fail("--consistency-models takes models, for txn-rw-register or txn-list-append only", EXIT_USAGE)
    required = _availability(availability) if availability else None
    dist = next((d for d in DISTRIBUTIONS if d == latency_dist), None)
    if dist is None:
        fail(f"--latency-dist: unknown shape {latency_dist!r} (use {', '.join(DISTRIBUTIONS)})", EXIT_USAGE)
    limit = _seconds("--time-limit", time_limit, 0.05, 86_400)
    mean_ms = _seconds("--latency", latency, 0, 10) * 1000.0
    interval = (
        _seconds("--nemesis-interval", nemesis_interval, 0.01, 3600)
        if nemesis_interval
        else min(10.0, max(0.2, limit / 5))
    )
    opts = CheckOptions(
        argv=tuple(argv),
        workload=workload,
        log_dir=log_dir,
        node_count=node_count,
        concurrency=concurrency or node_count,
        rate=rate,
        time_limit=limit,
        latency_ms=mean_ms,
        seed=seed if seed is not None else random.SystemRandom().randrange(1 << 31),
        nemesis=kinds,
        interval=interval,
        op_timeout=_seconds("--timeout", op_timeout, 0.01, 600)
        if op_timeout
        else default_timeout(workload, mean_ms),
        recovery=_seconds("--recovery", recovery, 0, 600),
        init_timeout=_seconds("--init-timeout", init_timeout, 0.1, 600),
        flood_limit=flood_limit,
        scenario=scenario,
        availability=required,
        consistency_models=models,
        latency_dist=dist,
        duplicate_clients=duplicate_clients,
    )
    if checklist:
        _checklist(opts, _int("--jobs", jobs, 1, JOBS_MAX) or 1, report, output)
    elif sweep_count is not None:
        _sweep(opts, sweep_count, start, jobs, scheduler, output)
    else:
        _one(opts, report, output)


SWEEP_MAX = 100_000
SWEEP_JOBS = 2  # a check's nodes are processes of their own: a sweep here is light on its own cores
JOBS_MAX = 256
SEED_MAX = 2**63 - 1
EXIT_INTERRUPTED = 130


def _int(option: str, text: str | None, lo: int, hi: int) -> int | None:
    from bhandar_cli.core.model import BadInput
    from bhandar_cli.sim.chaos import parse_int

    try:
        return parse_int(option, text, lo, hi)
    except BadInput as exc:
        fail(str(exc), EXIT_USAGE)


def _sweep_options(
    sweep: str | None,
    start: str | None,
    jobs: str | None,
    scheduler: str | None,
    seed: int | None,
    checklist: bool,
    report: Path | None,
) -> int | None:
    """How many seeds a sweep runs (None: not a sweep), after its options' checks."""
    count = _int("--sweep", sweep, 1, SWEEP_MAX)
    if count is None:
        for option, value in (("--start", start), ("--scheduler", scheduler)):
            if value is not None:
                fail(f"{option} applies only with --sweep", EXIT_USAGE)
        if jobs is not None and not checklist:
            fail("--jobs applies only with --sweep or --checklist", EXIT_USAGE)
        return None
    if seed is not None:
        fail("--seed and --sweep cannot be combined (a sweep starts at --start)", EXIT_USAGE)
    if checklist:
        fail("--checklist and --sweep cannot be combined", EXIT_USAGE)
    if report is not None:
        fail("--report applies to one run (not --sweep): repeat a seed with it", EXIT_USAGE)
    if jobs is not None and scheduler is not None:
        fail("--jobs and --scheduler cannot be combined (the Dask workers run the seeds)", EXIT_USAGE)
    return count


def _sweep(
    opts: CheckOptions,
    count: int,
    start: str | None,
    jobs: str | None,
    scheduler: str | None,
    output: OutputFormat,
) -> None:
    from bhandar_cli.check import run_sweep, sweep_json
    from bhandar_cli.core.model import BadInput
    from bhandar_cli.sim import DaskPool, DaskUnavailable, parse_scheduler

    first = _int("--start", start, 0, SEED_MAX - count + 1)
    first = random.SystemRandom().randrange(1 << 31) if first is None else first
    at_once = min(_int("--jobs", jobs, 1, JOBS_MAX) or SWEEP_JOBS, count)
    quiet = output is OutputFormat.json

    def line(seed: SweepSeed) -> None:
        if not quiet:
            print(_sweep_line(seed), flush=True)

    if scheduler is None:
        if not quiet:
            print(_sweep_header(opts, first, count, f"{at_once} at a time here"), flush=True)
        result = run_sweep(opts, first, count, at_once, line)
    else:
        try:
            address = parse_scheduler(scheduler)
        except BadInput as exc:
            fail(str(exc), EXIT_USAGE)
        try:
            dask = DaskPool(address)
        except DaskUnavailable as exc:
            fail(str(exc), EXIT_USAGE)
        with dask:
            threads = dask.threads()
            if not quiet:
                where = f"the Dask cluster at {address} ({counted(threads, 'worker thread')})"
                print(_sweep_header(opts, first, count, where), flush=True)
            result = run_sweep(opts, first, count, threads, line, dask)
    if quiet:
        emit_json(sweep_json(result))
    else:
        print(_sweep_tally(result), flush=True)
    if result.lost is not None:
        fail(result.lost, EXIT_USAGE)
    if result.interrupted and result.exit_code == 0:
        raise SystemExit(EXIT_INTERRUPTED)
    raise SystemExit(result.exit_code)


def _sweep_header(opts: CheckOptions, first: int, count: int, where: str) -> str:
    logs = Path(opts.log_dir) / "seed-N"
    return f"check sweep: {count} seeds, {first} to {first + count - 1}, on {where}; logs in {logs}"


def _sweep_line(seed: SweepSeed) -> str:
    said = "" if seed.status == "valid" else f" ({seed.summary})"
    return f"seed {seed.seed}: {seed.status}{said}; repeat with: {seed.command}"


def _sweep_tally(result: SweepResult) -> str:
    done = len(result.seeds)
    head = f"interrupted after {done} of {result.count} seeds" if result.interrupted else f"{done} seeds"
    counts = ", ".join(f"{result.count_of(s)} {s}" for s in ("valid", "invalid", "unknown", "error"))
    lines = [f"sweep: {head}: {counts} in {result.seconds:.1f} s"]
    bad = [str(s.seed) for s in result.seeds if s.status != "valid"]
    if bad:
        lines.append("not valid: " + " ".join(bad))
    return "\n".join(lines)


def _one(opts: object, report: Path | None, output: OutputFormat) -> None:
    from bhandar_cli.check import CheckOptions, render, run_check, to_json

    assert isinstance(opts, CheckOptions)
    if output is not OutputFormat.json:
        print(f"bhandar check: seed {opts.seed}, logs in {opts.log_dir} ...", file=sys.stderr, flush=True)
    outcome = run_check(opts)
    if report is not None:
        from bhandar_cli.check import page

        _write(report, page(outcome))
    if output is OutputFormat.json:
        emit_json(to_json(outcome, str(report or "")))
    else:
        print(render(outcome) + (f"\nreport: {report}" if report else ""), flush=True)
    if outcome.error:
        fail(f"check: {outcome.error}", 2)
    raise SystemExit(outcome.exit_code)


def _checklist(opts: object, jobs: int, report: Path | None, output: OutputFormat) -> None:
    from bhandar_cli.check import CheckOptions, curve_line, render_table, repeat_command, run_checklist

    assert isinstance(opts, CheckOptions)
    quiet = output is OutputFormat.json
    rows, outcomes = run_checklist(
        opts, jobs, (lambda _: None) if quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    )
    if report is not None:
        from bhandar_cli.check import checklist_page

        _write(report, checklist_page(f"bhandar check --checklist: {opts.workload}", rows, outcomes))
    codes = [o.exit_code for o in outcomes]
    code = 2 if 2 in codes else 1 if 1 in codes else 0
    if quiet:
        emit_json(
            {
                "cmd": "check",
                "ok": code == 0,
                "checklist": rows,
                "exit": code,
                "seed": opts.seed,
                "repeat": [repeat_command(o.options) for o in outcomes],
            }
        )
    else:
        print(render_table(rows))
        curves = [curve_line(row) for row in rows if row["staleness"]]
        if curves:
            print("\nstaleness (reads fresh, by how long after a write's acknowledgement they began):")
            print("\n".join(f"  {line}" for line in curves))
        for outcome, row in zip(outcomes, rows, strict=True):
            if outcome.exit_code:
                said = outcome.error or (outcome.verdict.summary if outcome.verdict else "")
                print(f"\n{row['scenario']}: {said}\n  repeat with: {repeat_command(outcome.options)}")
    raise SystemExit(code)


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write the report to {path}: {exc.strerror or exc}", 1)
