"""Batch mode: commands from -e, a script file or standard input, one reply per command.

Output is flushed after every command, so another program can drive the REPL line by line through
a pipe. In `-o json` mode every command prints exactly one JSON object on standard output (failures
too, with "ok": false) and failures are also told on standard error; in table mode failures go to
standard error only. The exit status is 0 unless --fail-fast stopped at a failed command (1).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import trio
from rich.console import Console

from bhandar_cli.client import Client
from bhandar_cli.core.config import NodeConfig
from bhandar_cli.core.store import Store
from bhandar_cli.node.backend import InProcessBackend
from bhandar_cli.node.cluster import InProcessCluster
from bhandar_cli.node.epoch_clock import cluster_clock
from bhandar_cli.node.storage import open_node_store
from bhandar_cli.outcomes import ClientError
from bhandar_cli.repl.session import Reply, Session
from bhandar_cli.repl.views import print_reply, render_error


@dataclass(frozen=True)
class ClusterOptions:
    nodes: int = 5
    zones: int = 3
    vnodes: int = 8
    replicas: int = 3
    seed: int = 0
    data_dir: str | None = None  # None: a temporary directory removed at exit
    memory: bool = False  # keep data in memory only (no disk at all)


@asynccontextmanager
async def open_session(options: ClusterOptions, output: str = "table") -> AsyncIterator[Session]:
    """Start an in-process cluster and yield a session on it; stop the cluster on exit."""
    config = NodeConfig(default_n=options.replicas)
    with contextlib.ExitStack() as stack:
        factory = None
        base: str | None = None
        if not options.memory:
            base = options.data_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="bhandar-"))
            stores: list[Any] = []

            def factory(name: str) -> Store:
                store = open_node_store(os.path.join(base, name))
                stores.append(store)
                return store

            stack.callback(lambda: [s.close() for s in stores])
        cluster = InProcessCluster(
            options.nodes, options.zones, options.vnodes, options.seed, config, store_factory=factory
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(cluster.run)
            try:
                yield Session(Client(InProcessBackend(cluster, base)), output)
            finally:
                nursery.cancel_scope.cancel()


def make_consoles(stdout: TextIO | None = None, stderr: TextIO | None = None) -> tuple[Console, Console]:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    width = None if out.isatty() else 120
    return Console(file=out, width=width, soft_wrap=True), Console(file=err, width=width, soft_wrap=True)


def emit(reply: Reply, session: Session, out: Console, err: Console) -> None:
    if reply.ok:
        print_reply(out, reply, session.output, session.commands)
        return
    if session.output == "json":
        print_reply(out, reply, "json", session.commands)
    assert isinstance(reply.data, ClientError)
    err.print(render_error(reply.data))
    err.file.flush()


async def run_lines(
    session: Session,
    next_line: Callable[[], str | None],
    out: Console,
    err: Console,
    fail_fast: bool = False,
    in_thread: bool = False,
) -> int:
    """Run commands until input ends or `quit`; returns the exit status."""
    while not session.quit:
        line = await trio.to_thread.run_sync(next_line) if in_thread else next_line()
        if line is None:
            break
        for reply in await session.run_line(line):
            emit(reply, session, out, err)
            if fail_fast and not reply.ok:
                return 1
    return 0


def line_source(script: str | None, commands: str | None, stdin: TextIO) -> Callable[[], str | None]:
    lines: Iterator[str]
    if commands is not None:
        lines = iter(commands.splitlines() or [""])
    elif script is not None:
        with open(script, encoding="utf-8") as fh:
            lines = iter(fh.read().splitlines())
    else:

        def from_stdin() -> str | None:
            line = stdin.readline()
            return None if line == "" else line.rstrip("\n")

        return from_stdin
    return lambda: next(lines, None)


SessionOpener = Callable[[], AbstractAsyncContextManager[Session]]


def run_batch(
    opener: SessionOpener,
    script: str | None,
    commands: str | None,
    fail_fast: bool,
    virtual_time: bool,
) -> int:
    source = line_source(script, commands, sys.stdin)
    reads_stdin = script is None and commands is None
    out, err = make_consoles()

    async def main() -> int:
        async with opener() as session:
            # With a real clock the cluster keeps running (pings, hints) while we wait for input.
            return await run_lines(
                session, source, out, err, fail_fast, in_thread=reads_stdin and not virtual_time
            )

    return trio.run(main, clock=cluster_clock(virtual_time))
