"""The client backend of one-shot commands: the data requests of a `DataClient` (client/client.py) to a
process cluster over blocking sockets (node/net/blocking_rpc.py), with no event loop at all.

A `DataClient` is async, but all it awaits is its backend's `request`, and here `request` never
suspends: it does its I/O blocking and returns. `run_to_completion` therefore drives a client
coroutine by hand, one `send` that runs it to its end; were something in it ever to suspend (an
await on a real event loop's primitive), it raises rather than hang. Routing and liveness follow
the trio backend (client/backends/tcp_backend.py): the ring of the cluster file, a node is alive while its
process runs, and one that does not answer is taken as down for the rest of the command.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bhandar_cli.client.data_client import DataClient
from bhandar_cli.core import from_wire, to_wire
from bhandar_cli.core.membership import Ring
from bhandar_cli.core.model import ClientError
from bhandar_cli.core.protocol import Failure
from bhandar_cli.fleet import ClusterFile, client_access, load_running, pid_alive
from bhandar_cli.node.net import CLIENT_CODES, BlockingRpc, RpcError

if TYPE_CHECKING:
    from bhandar_cli.core.protocol import Result

T = TypeVar("T")


class BlockingBackend:
    """A `RequestBackend` (client/backend.py) over one blocking connection per node, opened on first
    use."""

    def __init__(self, cluster: ClusterFile) -> None:
        self.cluster = cluster
        self.names: list[str] = cluster.names
        self.zones: dict[str, str] = cluster.zones
        self.ring: Ring = Ring.build(self.names, cluster.vnodes, self.zones)
        self._access = client_access(cluster)
        self._conns: dict[str, BlockingRpc] = {}
        self._down: set[str] = set()
        self._next_rid = 0

    def now(self) -> float:
        return time.monotonic()

    def new_rid(self) -> int:
        self._next_rid += 1
        return self._next_rid

    def partitions(self) -> list[list[str]]:
        return [list(g) for g in self.cluster.partitions]

    def is_alive(self, name: str) -> bool:
        return name not in self._down and pid_alive(self.cluster.node(name).pid)

    def _conn(self, name: str) -> BlockingRpc:
        conn = self._conns.get(name)
        if conn is None:
            entry = self.cluster.node(name)
            conn = BlockingRpc(entry.host, entry.port, name, self._access)
            conn.connect()
            self._conns[name] = conn
        return conn

    async def request(self, via: str, request: Any, timeout: float) -> Result:
        """The node's answer; a refusal with a code of its own (a token without the role) is
        raised as that ClientError, as the trio backend does."""
        try:
            body = self._conn(via).call("request", timeout, msg=to_wire(request))
            result = from_wire(body)
        except RpcError as exc:
            if exc.code:
                raise ClientError(exc.code, str(exc)) from None
            if exc.kind in ("unreachable", "lost"):
                self._down.add(via)
                self._conns.pop(via, None)
            return Failure(CLIENT_CODES[exc.kind], str(exc))
        except ValueError as exc:
            return Failure("internal", f"node {via} sent an answer this client cannot read: {exc}")
        return result  # type: ignore[no-any-return]

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


@contextmanager
def open_blocking_client(directory: str | Path) -> Iterator[DataClient]:
    """A `DataClient` on the running process cluster of `directory` (ClusterFileError if none);
    run its coroutines with `run_to_completion`."""
    backend = BlockingBackend(load_running(directory))
    try:
        yield DataClient(backend)
    finally:
        backend.close()


def run_to_completion(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a `DataClient` call on a `BlockingBackend`)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a one-shot client call suspended: it awaited an event loop that is not running")
