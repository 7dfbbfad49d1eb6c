"""Batch mode: the in-process cluster a script runs on, and its commands from -e, a file or stdin.

Output is flushed after every command, so another program can drive the REPL line by line through
a pipe. In `-o json` mode every command prints exactly one JSON object on standard output (failures
too, with "ok": false) and failures are also told on standard error; in table mode failures go to
standard error only. What stops a script and its exit status: repl/script.py.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import trio
from rich.console import Console

from bhandar_cli.client.backends.in_process_backend import InProcessBackend
from bhandar_cli.client.client import Client
from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.core.model.store import Store
from bhandar_cli.fleet.in_process_cluster import InProcessCluster
from bhandar_cli.node.epoch_clock import cluster_clock
from bhandar_cli.repl.commands import COMMANDS
from bhandar_cli.repl.script import ScriptRun, run_stream, run_text
from bhandar_cli.repl.session import ServeWeb, Session
from bhandar_cli.store.data_dir import open_node_store


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
async def open_session(
    options: ClusterOptions, output: str = "table", serve_web: ServeWeb | None = None
) -> AsyncIterator[Session]:
    """Start an in-process cluster and yield a session on it, with every REPL command (`web` when
    `serve_web` is given); stop the cluster on exit."""
    config = NodeConfig(default_n=options.replicas)
    with contextlib.ExitStack() as stack:
        factory = None
        base: str | None = None
        stores: list[Any] = []
        if not options.memory:
            base = options.data_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="bhandar-"))
            # Each store holds its directory's lock until it is closed, here at the end.
            stack.callback(lambda: [s.close() for s in stores])

            def factory(name: str) -> Store:
                store = open_node_store(os.path.join(base, name))
                stores.append(store)
                return store

        cluster = InProcessCluster(
            options.nodes, options.zones, options.vnodes, options.seed, config, store_factory=factory
        )
        if factory is not None:

            def close_node_stores() -> None:  # and those opened for the nodes since (a restore's)
                for host in cluster.hosts.values():
                    host.store.close()

            stack.callback(close_node_stores)
        async with trio.open_nursery() as nursery:
            await nursery.start(cluster.run)
            try:
                yield Session(Client(InProcessBackend(cluster, base)), COMMANDS, output, serve_web)
            finally:
                nursery.cancel_scope.cancel()


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
