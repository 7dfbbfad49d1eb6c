"""Opening a client on a cluster: an in-process cluster started for it (`open_in_process_client`,
shaped by `ClusterOptions`, run on `cluster_clock`), or the running process cluster of a directory
(`open_tcp_client`). The faces open their clients here, and stop the cluster by leaving the block.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from bhandar_cli.client.backends.in_process_backend import InProcessBackend
from bhandar_cli.client.client import Client
from bhandar_cli.core.model import NodeConfig, Store
from bhandar_cli.fleet import InProcessCluster
from bhandar_cli.node import EpochClock
from bhandar_cli.store import open_node_store

if TYPE_CHECKING:
    from bhandar_cli.client.backends.tcp_backend import TcpBackend


@dataclass(frozen=True)
class ClusterOptions:
    """The shape of an in-process cluster: nodes, zones, tokens per node, replication factor N of
    new keyspaces, the network's latency seed, and where its data lives."""

    nodes: int = 5
    zones: int = 3
    vnodes: int = 8
    replicas: int = 3
    seed: int = 0
    data_dir: str | None = None  # None: a temporary directory removed at exit
    memory: bool = False  # keep data in memory only (no disk at all)
    # Background anti-entropy's interval (0: off; None: NodeConfig's). A demo that shows a stale
    # replica turns it off: a round would repair the replica within seconds, before it is shown.
    repair_interval: float | None = None


@asynccontextmanager
async def open_in_process_client(options: ClusterOptions) -> AsyncIterator[Client[InProcessBackend]]:
    """Start an in-process cluster and yield a client on it; stop the cluster on exit."""
    config = NodeConfig(default_n=options.replicas)
    if options.repair_interval is not None:
        config = replace(config, repair_interval=options.repair_interval)
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
                yield Client(InProcessBackend(cluster, base))
            finally:
                nursery.cancel_scope.cancel()


def cluster_clock(virtual_time: bool) -> trio.abc.Clock:
    """The clock to run an in-process cluster on (`trio.run(..., clock=)`): virtual time (sleeps
    take no time, starting at 0) or Unix seconds, as process clusters use (node/epoch_clock.py),
    so timestamps in data read as dates."""
    if virtual_time:
        import trio.testing  # only here: it is a test harness (and imports pytest when present)

        return trio.testing.MockClock(autojump_threshold=0)
    return EpochClock()


@asynccontextmanager
async def open_tcp_client(
    directory: str | Path | None, consistency: str = "QUORUM"
) -> AsyncIterator[Client[TcpBackend]]:
    """A `Client` on the running process cluster of `directory` (ClusterFileError if none)."""
    from bhandar_cli.client.backends.tcp_backend import open_tcp_backend
    from bhandar_cli.fleet import resolve_dir

    async with open_tcp_backend(resolve_dir(str(directory) if directory else None)) as backend:
        yield Client(backend, consistency)
