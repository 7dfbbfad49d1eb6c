"""Batch mode: the session a script runs in (on an in-process cluster, or a process cluster's:
the client is opened by client/openers.py), and its commands from -e, a file or stdin.

Output is flushed after every command, so another program can drive the REPL line by line through
a pipe. In `-o json` mode every command prints exactly one JSON object on standard output (failures
too, with "ok": false) and failures are also told on standard error; in table mode failures go to
standard error only. What stops a script and its exit status: repl/script.py.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TextIO

import trio
from rich.console import Console

from bhandar_cli.client import ClusterOptions, cluster_clock, open_in_process_client, open_tcp_client
from bhandar_cli.repl.commands import COMMANDS
from bhandar_cli.repl.script import ScriptRun, run_stream, run_text
from bhandar_cli.repl.session import ServeWeb, Session


@asynccontextmanager
async def open_session(
    options: ClusterOptions, output: str = "table", serve_web: ServeWeb | None = None
) -> AsyncIterator[Session]:
    """Start an in-process cluster and yield a session on it, with every REPL command (`web` when
    `serve_web` is given); stop the cluster on exit."""
    async with open_in_process_client(options) as client:
        yield Session(client, COMMANDS, output, serve_web)


@asynccontextmanager
async def open_tcp_session(
    directory: str | Path | None, output: str = "table", serve_web: ServeWeb | None = None
) -> AsyncIterator[Session]:
    """A session on the running process cluster of `directory` (for `repl --connect DIR`)."""
    async with open_tcp_client(directory) as client:
        yield Session(client, COMMANDS, output, serve_web)


def make_consoles(stdout: TextIO | None = None, stderr: TextIO | None = None) -> tuple[Console, Console]:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    width = None if out.isatty() else 120
    return Console(file=out, width=width, soft_wrap=True), Console(file=err, width=width, soft_wrap=True)


SessionOpener = Callable[[], AbstractAsyncContextManager[Session]]


def run_batch(
    opener: SessionOpener,
    script: str | None,
    commands: str | None,
    keep_going: bool,
    virtual_time: bool,
) -> int:
    """Run -e COMMANDS, the --script file or standard input; returns the exit status."""
    lines: list[str] | None = None
    if commands is not None:
        lines = commands.splitlines()
    elif script is not None:
        with open(script, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    out, err = make_consoles()

    def read_line() -> str | None:
        line = sys.stdin.readline()
        return None if line == "" else line.rstrip("\n")

    async def next_line() -> str | None:
        # With a real clock the cluster keeps running (pings, hints) while we wait for input.
        return read_line() if virtual_time else await trio.to_thread.run_sync(read_line)

    async def main() -> int:
        async with opener() as session:
            if lines is None:
                return await run_stream(ScriptRun(session, out, err, keep_going, one_line=False), next_line)
            run = ScriptRun(session, out, err, keep_going, one_line=commands is not None and len(lines) <= 1)
            return await run_text(run, lines)

    return trio.run(main, clock=cluster_clock(virtual_time))
