"""`bhandar check --sweep N --start S`: one check with N consecutive seeds, and each seed's verdict.

This module owns running a sweep and its tally; cli/check_cmd.py parses and prints. Every seed
runs exactly as `bhandar check ... --seed S` would (the same `CheckOptions` with its seed), so its
repeat command replays its plan. Each seed runs in a slot of its own: its own log directory
(`--log-dir`/seed-S, holding its nodes' logs, data and history) and its own processes, each marked
with its own BHANDAR_CHECK_SLOT (check/checked_process.py), so runs side by side never share or kill each
other's anything, here or on a Dask worker.

Here, `jobs` seeds run at a time on one trio loop (check_run.py `run_checks`, as a checklist's
scenarios): a check's harness mostly waits on its node
processes, and a Ctrl-C then stops every run as it stops one check (every process stopped), with
the tally so far. With a `DaskPool` (sim/dask_pool.py, `--scheduler`) each seed is a task that runs
the same `sweep_seed` on a worker's own trio loop. A check bounds its own time (time limit,
recovery, init timeouts), so a sweep has no time limit of its own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import trio

from bhandar_cli.check.check_report import repeat_command
from bhandar_cli.check.check_run import CheckOptions, CheckOutcome, check_on_loop, run_checks
from bhandar_cli.sim import DaskPool, DaskUnavailable, seed_ranges

ERROR = "error"  # the run could not be judged (setup or protocol error): exit 2


@dataclass(frozen=True, slots=True)
class SweepSeed:
    """One seed's verdict, as one line can say it."""

    seed: int
    status: str  # valid | invalid | unknown | error
    summary: str  # the verdict's summary, or the error, on one line
    command: str  # the command that repeats this seed's run
    exit_code: int  # what `bhandar check --seed S` exits with: 0, 1 or 2
    seconds: float
    log_dir: str


@dataclass(frozen=True, slots=True)
class SweepResult:
    start: int
    count: int
    jobs: int  # seeds at a time (on Dask: the cluster's worker threads when it began)
    seeds: tuple[SweepSeed, ...]  # in seed order
    seconds: float
    interrupted: bool = False
    scheduler: str | None = None
    lost: str | None = None  # one line: the Dask cluster was lost, and the seeds it did not run

    def count_of(self, status: str) -> int:
        return sum(1 for s in self.seeds if s.status == status)

    @property
    def exit_code(self) -> int:
        """2 if any seed could not be judged or the cluster was lost, else 1 if any was invalid or
        unknown, else 0 (a checklist's rule); an interrupted sweep with all valid is the caller's."""
        codes = {s.exit_code for s in self.seeds}
        return 2 if 2 in codes or self.lost else 1 if 1 in codes else 0


def seed_options(opts: CheckOptions, seed: int) -> CheckOptions:
    """The options of one seed of the sweep: its seed and its own log directory (absolute, so a
    Dask worker on this machine writes where this process would)."""
    return replace(opts, seed=seed, log_dir=os.path.abspath(Path(opts.log_dir) / f"seed-{seed}"))


def summary_of(outcome: CheckOutcome) -> SweepSeed:
    opts = outcome.options
    if outcome.error:
        status, said = ERROR, outcome.error
    elif outcome.verdict is not None:
        status, said = outcome.verdict.status, outcome.verdict.summary
    else:
        status, said = ERROR, "no verdict"
    return SweepSeed(
        opts.seed,
        status,
        " ".join(said.split()),
        repeat_command(opts),
        outcome.exit_code,
        outcome.real_seconds,
        opts.log_dir,
    )


async def sweep_seed(opts: CheckOptions) -> SweepSeed:
    """One seed's check and its line: what every seed of a sweep runs, here or on Dask."""
    return summary_of(await check_on_loop(opts))


def run_sweep_seed(opts: CheckOptions) -> SweepSeed:
    """`sweep_seed` on a trio loop of its own: a Dask task."""
    return trio.run(sweep_seed, opts)


def run_sweep(
    opts: CheckOptions,
    start: int,
    count: int,
    jobs: int,
    on_seed: Callable[[SweepSeed], None] = lambda _: None,
    dask: DaskPool | None = None,
) -> SweepResult:
    """Seeds `start` .. `start + count - 1` of `opts`, `jobs` at a time here or on the Dask cluster
    of `dask`; each seed's line goes to `on_seed` as it finishes. Ctrl-C, or a lost cluster,
    returns the seeds that finished."""
    began = time.monotonic()
    done: list[SweepSeed] = []
    interrupted, lost = False, None

    def finished(line: SweepSeed) -> None:
        done.append(line)
        on_seed(line)

    seeds = (seed_options(opts, seed) for seed in range(start, start + count))
    try:
        if dask is None:
            run_checks(list(seeds), jobs, finished=lambda outcome: finished(summary_of(outcome)))
        else:
            for line in dask.results(run_sweep_seed, seeds, lambda o: f"seed {o.seed}", None, _unfinished):
                finished(line)
    except KeyboardInterrupt:
        interrupted = True
    except BaseExceptionGroup as group:  # a Ctrl-C that landed in one seed's task, here
        if group.split(KeyboardInterrupt)[1] is not None:
            raise
        interrupted = True
    except DaskUnavailable as e:
        gone = {s.seed for s in done}
        lost = f"{e}; seeds not run: {seed_ranges(s for s in range(start, start + count) if s not in gone)}"
    return SweepResult(
        start,
        count,
        jobs,
        tuple(sorted(done, key=lambda s: s.seed)),
        time.monotonic() - began,
        interrupted,
        None if dask is None else dask.address,
        lost,
    )


def _unfinished(opts: CheckOptions, why: str, seconds: float) -> SweepSeed:
    """A seed whose Dask task killed every worker that ran it: it could not be judged."""
    return SweepSeed(opts.seed, ERROR, why, repeat_command(opts), 2, seconds, opts.log_dir)


def sweep_json(result: SweepResult) -> dict[str, Any]:
    return {
        "cmd": "check",
        "sweep": {
            "start": result.start,
            "count": result.count,
            "jobs": result.jobs,
            "scheduler": result.scheduler,
        },
        "seeds": [
            {
                "seed": s.seed,
                "status": s.status,
                "summary": s.summary,
                "command": s.command,
                "exit": s.exit_code,
                "seconds": round(s.seconds, 3),
                "log_dir": s.log_dir,
            }
            for s in result.seeds
        ],
        "finished": len(result.seeds),
        "valid": result.count_of("valid"),
        "interrupted": result.interrupted,
        "lost": result.lost,
        "ok": result.exit_code == 0 and not result.interrupted,
        "exit": result.exit_code,
        "seconds": round(result.seconds, 3),
    }
