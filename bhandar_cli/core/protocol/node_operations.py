"""The calls a node serves on its RPC port besides client requests, declared once: the views
and admin calls (`NODE_CALLS`: name and the role a token needs), and the operations one node runs
on its own store (`NODE_OPERATIONS`: `flush` and `compact`).

The authenticator's table of roles takes every entry's role from here (security/auth.py `NEEDS`),
and a node process dispatches each call to the handler registered under its name
(node/rpc_service.py), refusing at import a handler for a call missing here. A new call is an
entry in `NODE_CALLS`, its handler, and the client that asks for it.

Everything that offers such an operation reads this table, and nothing else names it: the
authenticator asks for the role an operation `needs` (security/auth.py), a node process runs it
on its RPC port (node/rpc_service.py), the in-process backend runs it on a node of its own
(client/backends/in_process_backend.py), the TCP backend asks a node process for it
(client/backends/tcp_backend.py), the client asks one node or every live one
(client/cluster_admin.py `on_nodes`), and the REPL offers it as a command in the words below
(repl/commands/operate.py), which `help` and the man page show. A new operation of this kind is
one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class NodeStore(Protocol):
    """What the operations act on: a node's store on the LSM engine (store/record_store.py)."""

    def flush(self) -> str | None: ...
    def compact(self) -> int: ...


VIEW = "view"  # the role of a call any valid token may make
ADMIN = "admin"  # admin on every keyspace


@dataclass(frozen=True)
class NodeCall:
    """A view or admin call a node process serves: its name and the role a token needs."""

    name: str
    needs: str


NODE_CALLS: dict[str, NodeCall] = {
    call.name: call
    for call in (
        # views: any valid token
        NodeCall("info", VIEW),
        NodeCall("notes", VIEW),
        NodeCall("records", VIEW),
        NodeCall("hints", VIEW),
        NodeCall("metrics", VIEW),
        NodeCall("digest", VIEW),
        NodeCall("range_hashes", VIEW),
        NodeCall("members", VIEW),
        NodeCall("tree", VIEW),
        # changes to the cluster: admin on every keyspace
        NodeCall("remove", ADMIN),  # a member out for good, without its help (`cluster remove`)
        NodeCall("partition", ADMIN),
        NodeCall("heal", ADMIN),
        NodeCall("delay", ADMIN),
        NodeCall("shutdown", ADMIN),
        NodeCall("snapshot", ADMIN),
        NodeCall("token_create", ADMIN),
        NodeCall("token_list", ADMIN),
        NodeCall("token_revoke", ADMIN),
        NodeCall("join_token", ADMIN),
        NodeCall("config", ADMIN),  # a new version of the cluster configuration, applied at once
    )
}


@dataclass(frozen=True)
class NodeOperation:
    name: str
    summary: str  # one line: the REPL's `help` list and completion menus, the man page
    help: str  # the REPL's `help NAME` and the man page
    done: str  # how the REPL tells it was done: "flushed: A 1.2 ms, B 0.9 ms"
    result: str  # the field of each node's answer that holds what `run` returned
    run: Callable[[NodeStore], object]  # what the node does, on its own store
    needs: str = ADMIN  # the role a client token needs for it (security/auth.py)


NODE_OPERATIONS: dict[str, NodeOperation] = {
    op.name: op
    for op in (
        NodeOperation(
            "flush",
            "flush memtables to SSTables",
            "On NODE (default: every live node). A cluster kept in memory has no storage engine.",
            done="flushed",
            result="sstable",
            run=lambda store: store.flush(),
        ),
        NodeOperation(
            "compact",
            "compact SSTables",
            "On NODE (default: every live node), merge its SSTables into fewer.",
            done="compacted",
            result="compactions",
            run=lambda store: store.compact(),
        ),
    )
}
