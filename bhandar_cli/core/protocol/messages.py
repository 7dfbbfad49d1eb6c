"""Messages between clients and nodes and between nodes, and the effects a node returns.

All are immutable values of plain values (str, int, float, bytes, records), so the same objects
travel through the in-memory network, the simulator and, encoded as CBOR, over TCP. The hot ones
(replica messages, replies, effects) are value classes that mypyc compiles to native classes
(core/protocol/value_fields.py); the rarer ones stay frozen dataclasses. What a client
sends and receives is defined in core/protocol/client_messages.py (a one-shot command imports that
alone); the unions here (`ClientRequest`, `ClientReply`) name those messages too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, final

from bhandar_cli.core.model import KeyspaceDef, Record
from bhandar_cli.core.protocol.client_messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
)
from bhandar_cli.core.protocol.value_fields import ValueClass

# --- client requests that are not data: keyspaces, repair and decommission -------------------


@dataclass(frozen=True, slots=True)
class KeyspaceRequest:
    """Create a keyspace (or confirm an identical one exists)."""

    rid: int
    definition: KeyspaceDef
    hops: int = 0


@dataclass(frozen=True, slots=True)
class RepairRequest:
    """Run anti-entropy now: compare every range this node replicates with its other replicas."""

    rid: int
    keyspace: str | None = None
    hops: int = 0


@dataclass(frozen=True, slots=True)
class DecommissionRequest:
    """Stream this node's ranges to their future replicas, then leave the ring."""

    rid: int
    hops: int = 0


ClientRequest = PutRequest | GetRequest | IncrRequest | KeyspaceRequest | RepairRequest | DecommissionRequest

# --- their results ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyspaceResult:
    """The keyspace as the cluster has it, and whether this request created it."""

    definition: KeyspaceDef
    created: bool


@dataclass(frozen=True, slots=True)
class RepairResult:
    node: str
    ranges: int  # (range, peer) comparisons made
    differing: int  # of which found differences
    keys: int  # keys exchanged (exactly the keys that differed)
    failed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MoveResult:
    node: str
    kind: str  # leave
    keys: int  # records streamed


Result = PutResult | GetResult | IncrResult | KeyspaceResult | RepairResult | MoveResult | Failure


@final
class ClientReply(ValueClass):
    """A result travelling back to the node that forwarded the request. `stored`, for a put that
    carried an exact dot: whether the coordinator stored it under that dot (None: it does not say,
    being older or a relay that does not know), which tells the dot's minter whether a gap is left
    (core/roles/exact_dots.py)."""

    __match_args__: ClassVar = ("rid", "result", "stored")
    __slots__ = ("result", "rid", "stored")

    def __init__(self, rid: int, result: Result, stored: bool | None = None) -> None:
        self.rid: Final = rid
        self.result: Final = result
        self.stored: Final = stored


# --- between replicas ------------------------------------------------------------------------


@final
class ReplicaWrite(ValueClass):
    """Merge `record` into the receiver's copy. `hint_for` names the home replica a fallback
    stands in for; `kind` is write, repair or handoff (for metrics and traces)."""

    __match_args__: ClassVar = ("op", "keyspace", "key", "record", "hint_for", "kind")
    __slots__ = ("hint_for", "key", "keyspace", "kind", "op", "record")

    def __init__(
        self,
        op: int,
        keyspace: KeyspaceDef,
        key: str,
        record: Record,
        hint_for: str | None = None,
        kind: str = "write",
    ) -> None:
        self.op: Final = op
        self.keyspace: Final = keyspace
        self.key: Final = key
        self.record: Final = record
        self.hint_for: Final = hint_for
        self.kind: Final = kind


@final
class ReplicaAck(ValueClass):
    __match_args__: ClassVar = ("op", "ok", "error")
    __slots__ = ("error", "ok", "op")

    def __init__(self, op: int, ok: bool = True, error: str = "") -> None:
        self.op: Final = op
        self.ok: Final = ok
        self.error: Final = error


@final
class ReplicaRead(ValueClass):
    __match_args__: ClassVar = ("op", "keyspace", "key")
    __slots__ = ("key", "keyspace", "op")

    def __init__(self, op: int, keyspace: KeyspaceDef, key: str) -> None:
        self.op: Final = op
        self.keyspace: Final = keyspace
        self.key: Final = key


@final
class ReplicaReadReply(ValueClass):
    __match_args__: ClassVar = ("op", "record")
    __slots__ = ("op", "record")

    def __init__(self, op: int, record: Record | None) -> None:
        self.op: Final = op
        self.record: Final = record


@dataclass(frozen=True, slots=True)
class SchemaUpdate:
    keyspaces: tuple[KeyspaceDef, ...]
    seals: tuple[Any, ...] = ()  # protocol 5: issuers' seals, (name, seal) (core/model/keyspaces.py)


@dataclass(frozen=True, slots=True)
class Ping:
    seq: int


@dataclass(frozen=True, slots=True)
class Pong:
    seq: int


# --- effects ---------------------------------------------------------------------------------


@final
class Send(ValueClass):
    """Send `msg` to node `dst`. If `durable`, only after the node's store is synced."""

    __match_args__: ClassVar = ("dst", "msg", "durable")
    __slots__ = ("dst", "durable", "msg")

    def __init__(self, dst: str, msg: Any, durable: bool = False) -> None:
        self.dst: Final = dst
        self.msg: Final = msg
        self.durable: Final = durable


@final
class Respond(ValueClass):
    """Answer client request `rid`. If `durable`, only after the node's store is synced."""

    __match_args__: ClassVar = ("rid", "result", "durable")
    __slots__ = ("durable", "result", "rid")

    def __init__(self, rid: int, result: Result, durable: bool = False) -> None:
        self.rid: Final = rid
        self.result: Final = result
        self.durable: Final = durable


@dataclass(frozen=True, slots=True)
class Note:
    """Something worth telling a person watching (a node noticed a peer down, a hint delivered)."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    durable: bool = False  # (every effect says whether it waits for the sync: a note never does)


@dataclass(frozen=True, slots=True)
class DotLeaseSaved:
    """Tell the node, once its store is synced, that its dot lease's `mark` for `actor` is durable
    (core/roles/dot_lease.py). Always durable: that is its point."""

    actor: str
    mark: int
    durable: bool = True


Effect = Send | Respond | Note | DotLeaseSaved
