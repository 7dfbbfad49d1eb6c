"""Chaos swarms: many consecutive seeds of one chaos run, each in a worker process, and their tally.

This module owns running the seeds and collecting one `SeedOutcome` per seed; `cli/chaos_swarm_view.py`
validates options and renders. Every seed runs exactly as `bhandar chaos --seed S` with the same
options would (`run_chaos` on the same `ChaosOptions`), so a failing seed's replay command fails
the same way.

The pool is a few `multiprocessing` processes driven over one pipe each, rather than a
`ProcessPoolExecutor`, because the swarm must be able to stop one seed: a seed past its time
limit has its worker killed and replaced, so a hung seed costs its limit and no more; a worker
that dies (killed, out of memory) fails only its seed. Workers ignore SIGINT, so a Ctrl-C reaches
only this process, which kills the workers and returns the tally so far; SIGINT stays blocked while
a worker starts, so a Ctrl-C during its imports does not print its traceback. Workers are spawned,
not forked: the parent may be running a progress bar's thread, and forking a threaded process is
unsafe.

With a `DaskPool` (sim/dask_pool.py, `--scheduler`) the seeds run as tasks on a Dask cluster
instead: the task is `run_seed`, as in a worker process here, so the outcomes, and everything
printed from them, are the same. A Dask worker cannot be killed for one seed, so `run_seed` also
stops its own run at the time limit; a lost cluster ends the swarm with `lost` saying why and
which seeds did not run.
"""

from __future__ import annotations

import itertools
import multiprocessing
import shlex
import signal
import time
import traceback
from collections.abc import Callable, Generator, Set
from dataclasses import dataclass, replace
from functools import partial
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from bhandar_cli.sim import DaskPool, DaskUnavailable, seed_ranges
from bhandar_cli.sim.chaos.chaos_options import ChaosOptions
from bhandar_cli.sim.chaos.chaos_run import run_chaos
from bhandar_cli.sim.chaos.report import reproduce_command

# Checked whenever a worker is busy, so an interrupt or a time limit is noticed within this.
POLL_SECONDS = 0.5


@dataclass(frozen=True, kw_only=True, slots=True)
class SeedOutcome:
    """One seed's verdict: `violation` is None when it passed, else one line saying why it failed."""

    seed: int
    violation: str | None
    violations: int  # how many the checker found (1 for a run that raised or ran out of time)
    command: str  # the command line that replays this seed
    seconds: float
    stored_twice: int = 0  # puts stored as two identical siblings (the checker's count; goal 0)

    @property
    def passed(self) -> bool:
        return self.violation is None


@dataclass(frozen=True, slots=True)
class SwarmResult:
    base: ChaosOptions  # the options every seed shares (its seed is `start`)
    start: int
    count: int
    jobs: int
    seed_timeout: float
    outcomes: tuple[SeedOutcome, ...]  # in seed order
    seconds: float
    interrupted: bool
    scheduler: str | None = None  # the Dask scheduler the seeds ran on; None: worker processes here
    lost: str | None = None  # one line: the Dask cluster was lost, and the seeds it did not run

    @property
    def passed(self) -> int:
        return sum(1 for o in self.outcomes if o.passed)

    @property
    def failed(self) -> tuple[SeedOutcome, ...]:
        return tuple(o for o in self.outcomes if not o.passed)

    @property
    def stored_twice(self) -> int:
        return sum(o.stored_twice for o in self.outcomes)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _OutOfTime(Exception):
    pass


def run_seed(options: ChaosOptions, time_limit: float | None = None) -> SeedOutcome:
    """Run one seed; a run that raises is a failure (an internal bug) with the exception's summary.
    A run still going after `time_limit` seconds stops at its next progress step and fails."""
    started = time.perf_counter()
    command = reproduce_command(options)

    def in_time(_done: int) -> None:
        if time_limit is not None and time.perf_counter() - started >= time_limit:
            raise _OutOfTime

    try:
        report = run_chaos(options, in_time)
    except _OutOfTime:
        return SeedOutcome(
            seed=options.seed,
            violation=_late(time_limit),
            violations=1,
            command=command,
            seconds=time.perf_counter() - started,
        )
    except Exception as e:
        summary = _one_line(f"internal error: {type(e).__name__}: {e} ({_raised_at(e)})")
        seconds = time.perf_counter() - started
        return SeedOutcome(
            seed=options.seed, violation=summary, violations=1, command=command, seconds=seconds
        )
    found = report.check.violations
    first = _one_line(str(found[0])) if found else None
    seconds = time.perf_counter() - started
    return SeedOutcome(
        seed=options.seed,
        violation=first,
        violations=len(found),
        command=command,
        seconds=seconds,
        stored_twice=report.check.stored_twice,
    )


def _late(time_limit: float | None) -> str:
    return f"did not finish in {time_limit:g} s"


def _raised_at(error: BaseException) -> str:
    """Where the exception was raised, as `path:line`, so failing seeds can be grouped by bug."""
    frame = traceback.extract_tb(error.__traceback__)[-1]
    path = Path(frame.filename)
    package = Path(__file__).resolve().parents[3]
    shown = path.relative_to(package) if path.is_relative_to(package) else path
    return f"raised at {shown}:{frame.lineno}"


def _worker(base: ChaosOptions, seed_timeout: float, pipe: Connection) -> None:
    """A worker's loop: receive a seed, send its outcome, until the swarm kills it or goes away."""
    # Ignoring SIGINT discards one that arrived while it was blocked at start (see `_Worker.start`).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        while True:
            pipe.send(run_seed(replace(base, seed=pipe.recv()), seed_timeout))
    except EOFError:  # the swarm has gone
        return


class _Worker:
    """One worker process, the seed it is running and when that seed's time is up."""

    def __init__(self, base: ChaosOptions, seed_timeout: float) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipe, self._child = context.Pipe()
        self.process: BaseProcess = context.Process(
            target=_worker, args=(base, seed_timeout, self._child), daemon=True
        )
        self.seed: int | None = None
        self.started = 0.0
        self.deadline = 0.0

    def start(self) -> None:
        """Start the process (separate from `__init__`, so the swarm holds the worker before it
        runs and an interrupt at any point still stops it). It inherits SIGINT blocked."""
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self.process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        self._child.close()

    def give(self, seed: int, timeout: float) -> None:
        self.pipe.send(seed)
        self.seed, self.started = seed, time.perf_counter()
        self.deadline = self.started + timeout

    def take(self) -> SeedOutcome:
        outcome: SeedOutcome = self.pipe.recv()
        self.seed = None
        return outcome

    def stop(self) -> None:
        if self.process.pid is not None:  # it was started
            self.process.kill()
            self.process.join()
        self.pipe.close()
        self._child.close()


def run_swarm(
    base: ChaosOptions,
    count: int,
    jobs: int,
    seed_timeout: float,
    on_outcome: Callable[[SeedOutcome], None] | None = None,
    dask: DaskPool | None = None,
) -> SwarmResult:
    """Run seeds `base.seed` .. `base.seed + count - 1` on `jobs` workers, or on the Dask cluster
    of `dask` (then `jobs` is only reported). Each outcome is handed to `on_outcome` as it arrives;
    Ctrl-C stops the swarm and returns what finished, as does a lost Dask cluster (with `lost`)."""
    started = time.perf_counter()
    outcomes: list[SeedOutcome] = []
    interrupted = False
    lost = None
    running = (
        _outcomes(base, count, jobs, seed_timeout)
        if dask is None
        else _dask_outcomes(dask, base, count, seed_timeout)
    )
    try:
        for outcome in running:
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
    except KeyboardInterrupt:
        interrupted = True
    except DaskUnavailable as e:
        finished = {o.seed for o in outcomes}
        not_run = [s for s in range(base.seed, base.seed + count) if s not in finished]
        lost = f"{e}; seeds not run: {seed_ranges(not_run)}"
    finally:
        running.close()  # stops the workers, wherever the interrupt landed
    return SwarmResult(
        base=base,
        start=base.seed,
        count=count,
        jobs=jobs,
        seed_timeout=seed_timeout,
        outcomes=tuple(sorted(outcomes, key=lambda o: o.seed)),
        seconds=time.perf_counter() - started,
        interrupted=interrupted,
        scheduler=None if dask is None else dask.address,
        lost=lost,
    )


def _dask_outcomes(
    dask: DaskPool, base: ChaosOptions, count: int, seed_timeout: float
) -> Generator[SeedOutcome, None, None]:
    def unfinished(options: ChaosOptions, why: str, seconds: float) -> SeedOutcome:
        return SeedOutcome(
            seed=options.seed,
            violation=why,
            violations=1,
            command=reproduce_command(options),
            seconds=seconds,
        )

    seeds = (replace(base, seed=seed) for seed in range(base.seed, base.seed + count))
    task = partial(run_seed, time_limit=seed_timeout)
    yield from dask.results(task, seeds, lambda o: f"seed {o.seed}", seed_timeout, unfinished)


def _outcomes(
    base: ChaosOptions, count: int, jobs: int, seed_timeout: float
) -> Generator[SeedOutcome, None, None]:
    pending = iter(range(base.seed, base.seed + count))
    workers: list[_Worker] = []
    try:
        for first in itertools.islice(pending, jobs):
            workers.append(worker := _Worker(base, seed_timeout))
            worker.start()
            worker.give(first, seed_timeout)
        while busy := [w for w in workers if w.seed is not None]:
            ready = set(wait([w.pipe for w in busy] + [w.process.sentinel for w in busy], POLL_SECONDS))
            now = time.perf_counter()
            for i, worker in enumerate(workers):
                if worker.seed is None:
                    continue
                outcome = _finished(worker, ready, now, base, seed_timeout)
                if outcome is None:
                    continue
                yield outcome
                if worker.seed is not None:  # it did not answer: it is gone or stuck
                    worker.stop()
                    workers[i] = worker = _Worker(base, seed_timeout)
                    worker.start()
                if (seed := next(pending, None)) is not None:
                    worker.give(seed, seed_timeout)
    finally:
        for worker in workers:
            worker.stop()


def _finished(
    worker: _Worker, ready: Set[object], now: float, base: ChaosOptions, seed_timeout: float
) -> SeedOutcome | None:
    """The outcome of the worker's seed if it has one: its answer, its death, or its time limit."""
    assert worker.seed is not None
    if worker.pipe in ready:
        try:
            return worker.take()
        except (EOFError, OSError):
            pass  # it died while answering: its exit code below
    seconds = now - worker.started
    options = replace(base, seed=worker.seed)
    if worker.pipe in ready or worker.process.sentinel in ready:
        worker.process.join()
        why = f"internal error: the worker process died (exit code {worker.process.exitcode})"
        return SeedOutcome(
            seed=worker.seed, violation=why, violations=1, command=reproduce_command(options), seconds=seconds
        )
    if now >= worker.deadline:
        why = _late(seed_timeout)
        return SeedOutcome(
            seed=worker.seed, violation=why, violations=1, command=reproduce_command(options), seconds=seconds
        )
    return None


def swarm_command(result: SwarmResult) -> str:
    """The command line that runs this swarm again (the same seeds and options)."""
    parts = shlex.split(reproduce_command(result.base))
    parts[2:4] = ["--swarm", str(result.count), "--start", str(result.start)]
    return shlex.join(parts)


def swarm_json(result: SwarmResult) -> dict[str, Any]:
    base = result.base
    return {
        "start": result.start,
        "count": result.count,
        "options": {
            "ops": base.ops,
            "nodes": base.nodes,
            "replicas": base.replicas,
            "faults": None if base.faults is None else list(base.faults),
            "consistency": base.consistency,
            "keys": base.keys,
            "clients": base.clients,
            "storage": base.storage,
            "bugs": list(base.bugs),
            "jobs": result.jobs,
            "seed_timeout": result.seed_timeout,
            "scheduler": result.scheduler,
        },
        "finished": len(result.outcomes),
        "passed": result.passed,
        "stored_twice": result.stored_twice,
        "failed": [
            {"seed": o.seed, "violation": o.violation, "violations": o.violations, "command": o.command}
            for o in result.failed
        ],
        "interrupted": result.interrupted,
        "lost": result.lost,
        "ok": not result.failed and not result.interrupted and result.lost is None,
        "command": swarm_command(result),
        "seconds": round(result.seconds, 3),
    }
