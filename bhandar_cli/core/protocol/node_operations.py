"""The calls a node serves on its RPC port besides client requests, declared once: the views
and admin calls (`NODE_CALLS`: name and the role a token needs), and the operations one node runs
on its own store (`NODE_OPERATIONS`: `flush` and `compact`).

The authenticator's table of roles takes every entry's role from here (security/auth.py `NEEDS`),
and a node process dispatches each call to the handler registered under its name
(node/rpc_service.py), refusing at import a handler for a call missing here or taking other
arguments than its entry's. Each entry names its arguments' type (a frozen, keyword-only
dataclass; `NoArgs` for a call without any): the node reads a call's wire body into it with
`parse_args`, which refuses a missing or mistyped field in one line, and the client writes the
body from it with `call_body`; the wire keys are the field names. A new call is an entry in
`NODE_CALLS` with its arguments' class, its handler, and the client that asks for it.

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

import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Protocol, TypeVar, Union, get_args, get_origin, get_type_hints

from bhandar_cli.core.model import BadInput


class NodeStore(Protocol):
    """What the operations act on: a node's store on the LSM engine (store/record_store.py)."""

    def flush(self) -> str | None: ...
    def compact(self) -> int: ...


VIEW = "view"  # the role of a call any valid token may make
ADMIN = "admin"  # admin on every keyspace


@dataclass(frozen=True, kw_only=True)
class NoArgs:
    """The arguments of a call that takes none."""


@dataclass(frozen=True, kw_only=True)
class InfoArgs:
    counts: bool = True  # count each keyspace's keys (a scan of the store)


@dataclass(frozen=True, kw_only=True)
class NotesArgs:
    since: int = 0  # the last note the caller has read
    boot: str = ""  # the node's boot it was read from (another boot: from the start)


@dataclass(frozen=True, kw_only=True)
class RecordsArgs:
    keyspace: str
    key: str


@dataclass(frozen=True, kw_only=True)
class RangeHashesArgs:
    ranges: list[list[int]]  # [lo, hi] token ranges


@dataclass(frozen=True, kw_only=True)
class MembersArgs:
    placement: bool = False  # with each member's host and ports


@dataclass(frozen=True, kw_only=True)
class TreeArgs:
    keyspace: str
    lo: int
    hi: int


@dataclass(frozen=True, kw_only=True)
class RemoveArgs:
    node: str


@dataclass(frozen=True, kw_only=True)
class PartitionArgs:
    groups: list[list[str]]
    nodes: list[str] = field(default_factory=list)  # every node of the cluster


@dataclass(frozen=True, kw_only=True)
class DelayArgs:
    delays: dict[str, float]  # milliseconds added to messages to each node


@dataclass(frozen=True, kw_only=True)
class SnapshotArgs:
    snapshot: str
    to: str | None = None  # a directory the tables are copied to (default: linked in place)


@dataclass(frozen=True, kw_only=True)
class TokenCreateArgs:
    record: dict[str, object]  # the token's record in wire form (core/model tokens)


@dataclass(frozen=True, kw_only=True)
class TokenRevokeArgs:
    token_id: str


@dataclass(frozen=True, kw_only=True)
class JoinTokenArgs:
    ttl: float | None = None  # seconds (default: security/auth.py DEFAULT_TTL)


@dataclass(frozen=True, kw_only=True)
class ConfigArgs:
    config: dict[str, object] | None = None  # a version to apply (none: only read it)


@dataclass(frozen=True)
class NodeCall:
    """A view or admin call a node process serves: its name, the role a token needs, and the
    dataclass its arguments are read into (the handler's parameter: node/rpc_service.py)."""

    name: str
    needs: str
    args: type = NoArgs


NODE_CALLS: dict[str, NodeCall] = {
    call.name: call
    for call in (
        # views: any valid token
        NodeCall("info", VIEW, InfoArgs),
        NodeCall("notes", VIEW, NotesArgs),
        NodeCall("records", VIEW, RecordsArgs),
        NodeCall("hints", VIEW),
        NodeCall("metrics", VIEW),
        NodeCall("digest", VIEW),
        NodeCall("range_hashes", VIEW, RangeHashesArgs),
        NodeCall("members", VIEW, MembersArgs),
        NodeCall("tree", VIEW, TreeArgs),
        # changes to the cluster: admin on every keyspace
        NodeCall("remove", ADMIN, RemoveArgs),  # a member out for good, without its help (`cluster remove`)
        NodeCall("partition", ADMIN, PartitionArgs),
        NodeCall("heal", ADMIN),
        NodeCall("delay", ADMIN, DelayArgs),
        NodeCall("shutdown", ADMIN),
        NodeCall("snapshot", ADMIN, SnapshotArgs),
        NodeCall("token_create", ADMIN, TokenCreateArgs),
        NodeCall("token_list", ADMIN),
        NodeCall("token_revoke", ADMIN, TokenRevokeArgs),
        NodeCall("join_token", ADMIN, JoinTokenArgs),
        NodeCall("config", ADMIN, ConfigArgs),  # a new version of the cluster configuration, applied at once
    )
}

Args = TypeVar("Args")


class BadArguments(BadInput):
    """A call's wire body does not hold its arguments: the caller's fault (code `bad_input`), said
    in one line."""


def parse_args(cls: type[Args], body: Mapping[str, object], call: str) -> Args:
    """The arguments of `call` read from its wire body into `cls` (its `NodeCall.args`): each
    field by its name, checked against its annotation; keys that are no field (the frame's `id`
    and `op`, a newer caller's extras) are ignored. BadArguments for a missing or mistyped field."""
    hints = get_type_hints(cls)
    values: dict[str, object] = {}
    for f in fields(cls):  # type: ignore[arg-type]  # every NodeCall.args is a dataclass
        if f.name not in body:
            if f.default is MISSING and f.default_factory is MISSING:
                raise BadArguments(f"bad {call} arguments: field {f.name} is missing")
            continue
        value, expected = body[f.name], hints[f.name]
        if not _conforms(value, expected):
            raise BadArguments(
                f"bad {call} arguments: field {f.name} must be {_shown(expected)}, got {type(value).__name__}"
            )
        values[f.name] = value
    return cls(**values)


def call_body(call: str, args: object) -> dict[str, object]:
    """The wire body of `call`'s arguments, `args` an instance of its entry's class: each field by
    its name, but an optional field left at None is left out (the body callers always sent)."""
    if type(args) is not NODE_CALLS[call].args:  # a bug of the caller: the node would refuse it
        raise TypeError(
            f"node call {call!r} takes {NODE_CALLS[call].args.__name__}, not {type(args).__name__}"
        )
    return {
        f.name: getattr(args, f.name)
        for f in fields(args)  # type: ignore[arg-type]  # every NodeCall.args is a dataclass
        if not (f.default is None and getattr(args, f.name) is None)
    }


def _conforms(value: object, expected: object) -> bool:
    """Whether a decoded wire value has the annotated type (JSON and CBOR types only)."""
    origin = get_origin(expected)
    if origin is Union or origin is types.UnionType:
        return any(_conforms(value, option) for option in get_args(expected))
    if expected is object:
        return True
    if expected is type(None):
        return value is None
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:  # a bool is an int to Python, not to the wire
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:  # JSON writes 2.0 as 2
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected is str:
        return isinstance(value, str)
    if origin is list:
        (item,) = get_args(expected)
        return isinstance(value, list) and all(_conforms(v, item) for v in value)
    if origin is dict:
        key, item = get_args(expected)
        return isinstance(value, dict) and all(
            _conforms(k, key) and _conforms(v, item) for k, v in value.items()
        )
    raise TypeError(
        f"an argument of type {expected!r} cannot be read from the wire"
    )  # a bug in a table entry


def _shown(expected: object) -> str:
    """A type as the error says it: int, list[list[str]], str | None."""
    return expected.__name__ if isinstance(expected, type) else str(expected)


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
