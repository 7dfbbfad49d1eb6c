"""Tasks on a Dask distributed cluster, for when one machine is not enough (`--scheduler`).

This module owns the connection to a Dask scheduler (`DaskPool`) and running one task per item
on its workers, handing each result back as it finishes. What a task does is its caller's: a chaos
swarm's seed (sim/chaos/swarm.py) or a check sweep's seed (check/sweep.py) runs the very function
it runs on this machine, so a seed's verdict does not depend on where it ran.

Tasks are submitted only as fast as the cluster's worker threads take them, so a task's time
limit counts from about when it starts. Dask cannot stop a task that is running: one past its
limit is reported at once and cancelled, and its own code must notice its limit to free the
worker (the chaos run does). A worker that dies is Dask's to retry; a task that kills its workers
each time ends with `KilledWorker`, reported as that item's failure. Anything else that keeps the
cluster from running the items (not installed, unreachable, no workers, the scheduler lost
mid-run, a worker that cannot import bhandar) is `DaskUnavailable`: one line, with the items not
run, never a silent pass. Dask is optional (`pip install 'bhandar[dask]'`) and imported only here,
only when a scheduler is asked for.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import time
import uuid
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, TypeVar

from bhandar_cli.core.model import BadInput

if TYPE_CHECKING:
    from distributed import Client, Future

A = TypeVar("A")
R = TypeVar("R")

INSTALL = "--scheduler needs Dask's distributed package: pip install 'bhandar[dask]'"
CONNECT_SECONDS = 10.0  # to reach the scheduler and shake hands with it
WORKER_WAIT_SECONDS = 30.0  # for a first worker, or a new one after every worker left
POLL_SECONDS = 0.5  # a time limit or a lost scheduler is noticed within this
_SCHEDULER = re.compile(r"tcp://(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):(?P<port>[0-9]{1,5})")


class DaskUnavailable(Exception):
    """The cluster cannot run the items; the message is one line saying why (the caller, who knows
    which items finished, names the others)."""


def parse_scheduler(text: str) -> str:
    """The scheduler's address as Dask takes it; BadInput unless it is tcp://HOST:PORT."""
    address = text.strip()
    found = _SCHEDULER.fullmatch(address)
    if found is None or not 1 <= int(found["port"]) <= 65535:
        raise BadInput(f"--scheduler takes the Dask scheduler's address as tcp://HOST:PORT, got {text!r}")
    return address


def seed_ranges(seeds: Iterable[int]) -> str:
    """Seeds as runs of consecutive ones: `3-5 9 12-13`."""
    runs: list[list[int]] = []
    for seed in sorted(seeds):
        if runs and seed == runs[-1][1] + 1:
            runs[-1][1] = seed
        else:
            runs.append([seed, seed])
    return " ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


class DaskPool:
    """A client of one Dask scheduler with at least one worker. Use it as a context manager."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._client = _connect(address)

    def __enter__(self) -> DaskPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a scheduler already gone: nothing is left to close
            self._client.close(timeout=CONNECT_SECONDS)

    def threads(self) -> int:
        """Worker threads in the cluster now (a worker process runs one task per thread)."""
        try:
            return sum(self._client.nthreads().values())
        except Exception as e:  # the scheduler is gone (its errors are OSErrors, timeouts, ...)
            raise DaskUnavailable(f"lost the Dask scheduler at {self.address}") from e

    def results(
        self,
        task: Callable[[A], R],
        items: Iterable[A],
        name: Callable[[A], str],
        time_limit: float | None,
        unfinished: Callable[[A, str, float], R],
    ) -> Generator[R, None, None]:
        """`task(item)` for every item, as each finishes (not in order). An item past `time_limit`
        seconds, or whose task killed its workers, gives `unfinished(item, why, seconds)`. Raises
        DaskUnavailable when the cluster is lost; closing the generator cancels what is left."""
        waiting = iter(items)
        more = True  # `waiting` may hold more items
        running: dict[Future, tuple[A, float]] = {}
        no_workers_since: float | None = None
        try:
            while more or running:
                threads = self.threads()
                now = time.perf_counter()
                if threads == 0:
                    no_workers_since = no_workers_since or now
                    if now - no_workers_since > WORKER_WAIT_SECONDS:
                        raise DaskUnavailable(f"every Dask worker left the scheduler at {self.address}")
                else:
                    no_workers_since = None
                while more and len(running) < threads:
                    try:
                        item = next(waiting)
                    except StopIteration:
                        more = False
                        break
                    key = f"bhandar-{name(item).replace(' ', '-')}-{uuid.uuid4().hex[:12]}"
                    future = self._client.submit(task, item, key=key, pure=False)
                    running[future] = (item, time.perf_counter())
                done = self._wait(list(running))
                now = time.perf_counter()
                for future, (item, started) in list(running.items()):
                    if future in done:
                        del running[future]
                        result = self._result(future, item, name, now - started, unfinished)
                        if result is None:
                            raise DaskUnavailable(f"lost the Dask scheduler at {self.address}")
                        yield result
                    elif time_limit is not None and now - started >= time_limit:
                        del running[future]
                        future.cancel()
                        yield unfinished(item, f"did not finish in {time_limit:g} s", now - started)
        finally:
            if running:
                with contextlib.suppress(Exception):  # the scheduler is gone, and the tasks with it
                    self._client.cancel(list(running))

    def _wait(self, futures: list[Future]) -> set[Future]:
        """The futures done within POLL_SECONDS (none if none are)."""
        from distributed import wait

        if not futures:
            return set()
        try:
            with self._client.as_current():  # `wait` finds its client as the current one
                done, _ = wait(futures, timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return set()
        except Exception as e:  # futures cancelled because the connection was lost, ...
            raise DaskUnavailable(f"lost the Dask scheduler at {self.address}") from e
        return set(done)

    def _result(
        self,
        future: Future,
        item: A,
        name: Callable[[A], str],
        seconds: float,
        unfinished: Callable[[A, str, float], R],
    ) -> R | None:
        """The task's result; None when the scheduler dropped it (the connection was lost)."""
        from distributed import KilledWorker

        if future.status == "finished":
            try:
                result: R = future.result()
            except Exception:  # gone between the status and the result: lost with the scheduler
                return None
            return result
        if future.status != "error":  # cancelled or lost: the scheduler let go of it
            return None
        error = future.exception()
        if isinstance(error, KilledWorker):
            why = "internal error: every Dask worker that ran it died (KilledWorker)"
            return unfinished(item, why, seconds)
        # The task's own code turns every error of a run into a result: this one is the worker's
        # (it cannot import bhandar, or a different version of it).
        raise DaskUnavailable(
            f"a Dask worker could not run {name(item)}: {_why(error)} "
            "(every worker needs this version of bhandar installed)"
        )


def _why(error: BaseException | None) -> str:
    if error is None:
        return "no reason given"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _connect(address: str) -> Client:
    try:
        from distributed import Client
    except ImportError as e:
        raise DaskUnavailable(INSTALL) from e
    # Dask logs a lost connection as tracebacks on standard error; the caller says it in one line.
    # Its configuration gives some of its loggers levels of their own, so each is quieted.
    for logger in list(logging.root.manager.loggerDict):
        if logger == "distributed" or logger.startswith("distributed."):
            logging.getLogger(logger).setLevel(logging.CRITICAL + 1)
    found = _SCHEDULER.fullmatch(address)
    assert found is not None, address  # parse_scheduler checked it
    host, port = found["host"].strip("[]"), int(found["port"])
    try:  # a quick look first: Dask's own connect retries a refused port until its timeout
        socket.create_connection((host, port), timeout=CONNECT_SECONDS).close()
    except OSError as e:
        why = e.strerror or str(e) or type(e).__name__
        raise DaskUnavailable(f"cannot reach the Dask scheduler at {address}: {why}") from e
    try:
        client = Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
    except Exception as e:  # it answered, but is no Dask scheduler (or not one of this version)
        raise DaskUnavailable(f"cannot connect to the Dask scheduler at {address}: {_why(e)}") from e
    try:
        client.wait_for_workers(1, timeout=WORKER_WAIT_SECONDS)
    except Exception as e:
        client.close()
        raise DaskUnavailable(
            f"no Dask worker joined the scheduler at {address} in {WORKER_WAIT_SECONDS:g} s "
            f"(start one: dask worker {address} --nthreads 1)"
        ) from e
    return client
