"""What the client needs from a cluster: `Backend`, the one protocol every backend of the full
client implements (client/backends/: the in-process cluster, node processes over TCP), and
`RequestBackend`, its data part, which is all a one-shot command's backend (blocking sockets)
offers and all `DataClient` asks for.

What a cluster cannot do is declared in its `Capabilities`, never found out by probing the backend
for a method: an operation the cluster cannot run says so in a sentence of the client's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from bhandar_cli.store import RestoreSummary

if TYPE_CHECKING:
    from bhandar_cli.client.membership import ClusterMembership
    from bhandar_cli.core import HintQueueRow, NodeInfo
    from bhandar_cli.core.membership import MemberRow, Ring
    from bhandar_cli.core.model import Record
    from bhandar_cli.core.protocol import NodeOperation, Result


@dataclass(frozen=True)
class Capabilities:
    """What a cluster can do beyond requests, views, faults and membership."""

    # Its nodes keep their data in the LSM engine: flush, compact, snapshot and restore work on
    # them (an in-process cluster kept in memory has no engine).
    storage_engine: bool
    # Its nodes are processes: each is stopped cleanly and waited for, can be restarted at another
    # wire protocol (`upgrade to=N`), and the cluster file keeps the configuration a rollout set.
    node_processes: bool


class SnapshotDone(TypedDict):
    """A snapshot taken on every live node (`Backend.snapshot`)."""

    name: str
    files: int  # files linked or copied, over every node
    ms: float
    to: str | None  # where its files are, when copied out of the data directories


class RestoreDone(RestoreSummary):
    """A snapshot restored on the nodes that hold it (`Backend.restore`), and what it cost."""

    name: str
    nodes: list[str]
    ms: float
    verified_files: int


class RequestBackend(Protocol):
    """What the data operations need from a running cluster: its nodes, and requests to them."""

    names: list[str]
    zones: dict[str, str]

    @property
    def ring(self) -> Ring: ...  # read-only: the in-process backend computes it from gossip
    def now(self) -> float: ...
    def is_alive(self, name: str) -> bool: ...
    def new_rid(self) -> int: ...
    def partitions(self) -> list[list[str]]: ...
    async def request(self, via: str, request: Any, timeout: float) -> Result:
        """Node `via`'s answer to `request`, a `Failure` when it failed: with a code in
        `NOT_APPLIED` (core/model/errors.py) only when it was not run (the node not listening,
        stopping, or refusing it unrun), so the client may send it to another node."""
        ...


class Backend(RequestBackend, Protocol):
    """What the whole client needs: each node's views, faults, membership, storage, configuration."""

    capabilities: Capabilities

    @property
    def replicas(self) -> int:
        """The replication factor N new keyspaces get (an upgrade keeps N - 1 replicas up)."""
        ...

    # --- each node's views
    async def node_info(self, name: str, counts: bool = True) -> NodeInfo: ...
    async def node_records(
        self, name: str, keyspace: str, key: str
    ) -> tuple[Record | None, Record | None]: ...
    async def node_hints(self, name: str) -> list[HintQueueRow]: ...
    async def node_metrics(self, name: str) -> Any: ...
    async def node_members(self, name: str, placement: bool = False) -> list[MemberRow]:
        """Node `name`'s membership table (with `placement`: each member's token positions and
        HTTP address too); [] when it does not answer."""
        ...

    async def membership(self) -> ClusterMembership:
        """The membership as the nodes hold it (client/membership.py), asked of them at most once
        a second; the backend's `names`, `zones` and `ring` follow it."""
        ...

    async def node_tree(self, name: str, keyspace: str, lo: int, hi: int) -> list[list[Any]]: ...
    async def drain_notes(self) -> list[tuple[str, dict[str, Any], str]]: ...
    async def convergence_problems(self) -> list[str]: ...

    # --- faults and node lives
    async def kill(self, name: str) -> bool: ...
    async def revive(self, name: str, protocol: int | None = None) -> bool:
        """Start a stopped node again; at wire protocol `protocol` only with `node_processes`."""
        ...

    async def stop_node(self, name: str) -> str:
        """Stop a node for a restart, the cleanest way the cluster has; how it stopped."""
        ...

    def protocol_of(self, name: str) -> int | None:
        """The wire protocol node `name` starts with; None when the nodes share this process's."""
        ...

    async def partition(self, groups: list[list[str]]) -> list[list[str]]: ...
    async def heal(self) -> None: ...
    async def delay(self, name: str, ms: float) -> None: ...

    # --- membership
    async def add_node(self, name: str, zone: str | None) -> str: ...
    async def retire(self, name: str) -> None:
        """Stop a node that has left the ring and forget it."""
        ...

    def issuers(self) -> tuple[str, ...]:
        """The nodes holding the cluster CA key, which seal what only an issuer may say (keyspace
        definitions, tokens, removals): () in a cluster without one."""
        ...

    async def remove_member(self, name: str) -> str:
        """Have an issuing node take member `name` out for good, without its help (its
        membership says left; every node refuses it from then on): the node that sealed it."""
        ...

    # --- storage (with `storage_engine`)
    async def run_on_node(self, operation: NodeOperation, name: str) -> dict[str, Any]:
        """Node `name` runs `operation` on its store: {"node", the operation's `result`, "ms"}."""
        ...

    async def snapshot(self, snapshot: str, to: str | None = None) -> SnapshotDone: ...
    async def restore(self, snapshot: str, until: float | None = None) -> RestoreDone: ...

    # --- configuration
    async def set_node_config(self, name: str, plain: dict[str, Any]) -> dict[str, Any]:
        """Apply a version of the cluster configuration on node `name` now."""
        ...

    def save_config(self, plain: dict[str, Any]) -> None:
        """Keep the cluster configuration where restarted nodes find it (with `node_processes`:
        the cluster file)."""
        ...
