"""The one client API the REPL and the CLI use, over an in-process cluster or node processes.

`DataClient` (data_client.py) holds the data operations (get, put, delete, incr) and needs only a
backend that answers requests; `Client` adds the cluster views and operations. Both are async:
`Client` runs inside trio, and one-shot commands run a `DataClient` on a blocking backend whose
awaits never suspend, without an event loop (client/backends/blocking_backend.py), which is why trio is
imported here only where it is used. Data operations return outcome dataclasses (`outcomes.py`);
cluster views return dictionaries in the JSON shapes of the man page's JSON OUTPUT. Every failure
is raised as `ClientError` with a stable `code`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Protocol

from bhandar_cli.client.cluster_ops import ClusterOps
from bhandar_cli.client.cluster_views import ClusterViews
from bhandar_cli.client.data_client import REROUTES, DataClient, RequestBackend
from bhandar_cli.client.outcomes import ClientError
from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.config import KeyspaceDef, parse_ttl
from bhandar_cli.core.model.errors import BadInput, BhandarError
from bhandar_cli.core.model.records import Record
from bhandar_cli.core.protocol.messages import KeyspaceRequest, KeyspaceResult

__all__ = ["REROUTES", "Backend", "Client", "DataClient", "RequestBackend"]


class Backend(RequestBackend, Protocol):
    """What the whole client needs: views of each node, faults, membership and storage changes."""

    async def node_info(self, name: str, counts: bool = True) -> dict[str, Any]: ...
    async def node_records(
        self, name: str, keyspace: str, key: str
    ) -> tuple[Record | None, Record | None]: ...
    async def node_hints(self, name: str) -> list[dict[str, Any]]: ...
    async def node_metrics(self, name: str) -> Any: ...
    async def kill(self, name: str) -> bool: ...
    async def revive(self, name: str) -> bool: ...
    async def partition(self, groups: list[list[str]]) -> list[list[str]]: ...
    async def heal(self) -> None: ...
    async def delay(self, name: str, ms: float) -> None: ...
    async def convergence_problems(self) -> list[str]: ...
    async def node_members(self, name: str) -> list[dict[str, Any]]: ...
    async def node_tree(self, name: str, keyspace: str, lo: int, hi: int) -> list[list[Any]]: ...
    async def drain_notes(self) -> list[tuple[str, dict[str, Any], str]]: ...
    async def add_node(self, name: str, zone: str | None) -> str: ...
    async def flush(self, name: str) -> dict[str, Any]: ...
    async def compact(self, name: str) -> dict[str, Any]: ...
    async def snapshot(self, snapshot: str, to: str | None = None) -> dict[str, Any]: ...
    async def restore(self, snapshot: str, until: float | None = None) -> dict[str, Any]: ...


class Client(DataClient, ClusterViews, ClusterOps):
    backend: Backend

    def __init__(self, backend: Backend, consistency: str = "QUORUM", timeout: float = 5.0) -> None:
        super().__init__(backend, consistency, timeout)

    async def _replicas_of(self, keyspace: str, key: str) -> tuple[str, ...] | None:
        try:
            n = await self._replication(keyspace)
        except (BhandarError, ClientError):
            return None  # the write's reply still names its coordinator
        return self.backend.ring.preference_list(key_token(keyspace, key), n)

    async def keyspace_create(
        self,
        name: str,
        policy: str = "siblings",
        n: int | None = None,
        quorum: str = "sloppy",
        ttl: str | int = 0,
    ) -> dict[str, Any]:
        """Create a keyspace; `ttl` in seconds, or as text (`60s`, `5m`, `2h`, `1d`)."""
        default_n = 3
        info = await self._any_info()
        if info.get("keyspaces"):
            default_n = next((k["n"] for k in info["keyspaces"] if k["name"] == "counters"), 3)
        seconds = parse_ttl(ttl) if isinstance(ttl, str) else ttl
        definition = KeyspaceDef(name, policy, default_n if n is None else n, quorum, seconds)
        if definition.n > len(self.backend.names):
            raise BadInput(
                f"n={definition.n} is more than the {len(self.backend.names)} nodes of this cluster"
            )
        via = next((x for x in self.backend.names if self.backend.is_alive(x)), None)
        if via is None:
            raise ClientError("unavailable", "every node is down; revive one first")
        result = await self._call(via, KeyspaceRequest(self.backend.new_rid(), definition))
        assert isinstance(result, KeyspaceResult)
        await self._schema_agreed(via, name)
        # The definition as `keyspace list` shows it (core/node_views.py), and whether it is new.
        return {"cmd": "keyspace", "ok": True, **asdict(result.definition), "created": result.created}

    async def _schema_agreed(self, via: str, name: str) -> None:
        """Wait (at most the request timeout) until every live node `via` can reach knows keyspace
        `name`, as Cassandra's drivers wait for schema agreement: a put right after the create
        may go to any of them, and one that has not heard of it yet refuses it."""
        import trio

        group = next((g for g in self.backend.partitions() if via in g), self.backend.names)
        with trio.move_on_after(self.timeout):
            while True:
                waiting = []
                for node in group:
                    if self.backend.is_alive(node):
                        info = await self.backend.node_info(node, counts=False)
                        if name not in {k["name"] for k in info.get("keyspaces", [])}:
                            waiting.append(node)
                if not waiting:
                    return
                await trio.sleep(0.05)

    async def keyspace_list(self) -> dict[str, Any]:
        info = await self._any_info()
        spaces = sorted(info.get("keyspaces", []), key=lambda k: k["name"])
        return {"cmd": "keyspace", "ok": True, "keyspaces": spaces}
