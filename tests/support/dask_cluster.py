"""A Dask cluster of worker processes on 127.0.0.1, started as docs/scale.md starts one: `dask
scheduler` (on a free port it picks and logs) and `dask worker ADDRESS --nworkers N --nthreads 1`,
each a subprocess in a session of its own, so that stopping it stops whatever it started.

Waits are on conditions with deadlines: the scheduler's "Scheduler at:" line, then the scheduler's
own count of workers. The scheduler's log is drained by a thread (a full pipe would block it).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

START_SECONDS = 120.0  # a loaded machine imports distributed slowly
STOP_SECONDS = 30.0
_ADDRESS = re.compile(r"Scheduler at:\s+(tcp://127\.0\.0\.1:[0-9]+)")


@dataclass
class LocalDask:
    address: str
    scheduler: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]

    def kill_scheduler(self) -> None:
        """SIGKILL the scheduler (a scheduler that dies mid-run) and reap it."""
        _signal(self.scheduler, signal.SIGKILL)
        self.scheduler.wait(timeout=STOP_SECONDS)


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's session, SIGKILL if it outlives the grace, then reap it."""
    _signal(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        _signal(proc, signal.SIGKILL)
        proc.wait(timeout=STOP_SECONDS)
    _signal(proc, signal.SIGKILL)  # anything of its session still there


def _drain(pipe: IO[bytes], lines: queue.Queue[str], log: Path) -> None:
    with log.open("ab") as out:
        for raw in pipe:
            out.write(raw)
            out.flush()
            lines.put(raw.decode("utf-8", "replace"))
    lines.put("")  # the end: the scheduler exited


def _dask(*args: str, where: Path, stdout: IO[bytes] | int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "dask", *args],
        cwd=where,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


@contextlib.contextmanager
def dask_cluster(where: Path, workers: int = 2) -> Iterator[LocalDask]:
    """A scheduler and `workers` worker processes of one thread each, stopped on leaving."""
    from distributed import Client

    where.mkdir(parents=True, exist_ok=True)
    scheduler = _dask(
        "scheduler",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--no-dashboard",
        where=where,
        stdout=subprocess.PIPE,
    )
    try:
        assert scheduler.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(
            target=_drain, args=(scheduler.stdout, lines, where / "scheduler.log"), daemon=True
        ).start()
        address = ""
        while not address:
            line = lines.get(timeout=START_SECONDS)
            assert line, f"the scheduler exited: {(where / 'scheduler.log').read_text()}"
            found = _ADDRESS.search(line)
            address = found[1] if found else ""
        with (where / "worker.log").open("wb") as log:
            worker = _dask(
                "worker",
                address,
                "--nworkers",
                str(workers),
                "--nthreads",
                "1",
                "--host",
                "127.0.0.1",
                "--no-dashboard",
                "--local-directory",
                str(where),
                where=where,
                stdout=log,
            )
        try:
            with Client(address, timeout=START_SECONDS, set_as_default=False) as client:
                client.wait_for_workers(workers, timeout=START_SECONDS)
            yield LocalDask(address, scheduler, worker)
        finally:
            _stop(worker)
    finally:
        _stop(scheduler)
