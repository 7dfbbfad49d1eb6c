"""Messages between clients and nodes and between nodes, and the effects a node returns.

All are frozen dataclasses of plain values (str, int, float, bytes, records), so the same objects
travel through the in-memory network, the simulator and, encoded as CBOR, over TCP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bhandar_cli.core.config import KeyspaceDef
from bhandar_cli.core.records import Record
from bhandar_cli.core.versions import Sibling

TraceSteps = tuple[tuple[float, str], ...]  # (milliseconds since the request arrived, what happened)

# --- client requests (from a client, or forwarded by a node that is not a replica) ------------


@dataclass(frozen=True, slots=True)
class PutRequest:
    """put (value is bytes) or delete (value is None). `context is None` means a blind write."""

    rid: int
    keyspace: str
    key: str
    value: bytes | None
    ctype: str
    context: dict[str, int] | None
    consistency: str = "QUORUM"
    trace: bool = False
    hops: int = 0
    avoid: tuple[str, ...] = ()  # coordinators that did not answer it in time (a fallback)


@dataclass(frozen=True, slots=True)
class GetRequest:
    rid: int
    keyspace: str
    key: str
    consistency: str = "QUORUM"
    trace: bool = False
    hops: int = 0


@dataclass(frozen=True, slots=True)
class IncrRequest:
    rid: int
    keyspace: str
    key: str
    delta: int
    request_id: str
    consistency: str = "QUORUM"
    trace: bool = False
    hops: int = 0


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

# --- results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PutResult:
    coordinator: str
    acks: int
    needed: int
    warnings: tuple[str, ...] = ()
    hinted: tuple[str, ...] = ()  # "E for D": fallbacks that took a hint
    trace: TraceSteps = ()


@dataclass(frozen=True, slots=True)
class GetResult:
    coordinator: str
    record: Record | None
    replies: int
    needed: int
    trace: TraceSteps = ()
    # lww keyspaces: versions the replicas held that last-writer-wins discarded in this merge
    dropped: tuple[Sibling, ...] = ()
    warnings: tuple[str, ...] = ()  # e.g. a key merges left over the sibling limit


@dataclass(frozen=True, slots=True)
class IncrResult:
    coordinator: str
    value: int
    acks: int
    needed: int
    trace: TraceSteps = ()


@dataclass(frozen=True, slots=True)
class KeyspaceResult:
    definition: KeyspaceDef
    created: bool


@dataclass(frozen=True, slots=True)
class Failure:
    """A request that failed; `code` is an ErrorCode, `error` a sentence for a person."""

    code: str
    error: str
    answered: int = 0
    needed: int = 0
    coordinator: str = ""
    trace: TraceSteps = ()


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


@dataclass(frozen=True, slots=True)
class ClientReply:
    """A result travelling back to the node that forwarded the request."""

    rid: int
    result: Result


# --- between replicas ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaWrite:
    """Merge `record` into the receiver's copy. `hint_for` names the home replica a fallback
    stands in for; `kind` is write, repair or handoff (for metrics and traces)."""

    op: int
    keyspace: KeyspaceDef
    key: str
    record: Record
    hint_for: str | None = None
    kind: str = "write"


@dataclass(frozen=True, slots=True)
class ReplicaAck:
    op: int
    ok: bool = True
    error: str = ""


@dataclass(frozen=True, slots=True)
class ReplicaRead:
    op: int
    keyspace: KeyspaceDef
    key: str


@dataclass(frozen=True, slots=True)
class ReplicaReadReply:
    op: int
    record: Record | None


@dataclass(frozen=True, slots=True)
class SchemaUpdate:
    keyspaces: tuple[KeyspaceDef, ...]


@dataclass(frozen=True, slots=True)
class Ping:
    seq: int


@dataclass(frozen=True, slots=True)
class Pong:
    seq: int


# --- effects ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    """Send `msg` to node `dst`. If `durable`, only after the node's store is synced."""

    dst: str
    msg: Any
    durable: bool = False


@dataclass(frozen=True, slots=True)
class Respond:
    """Answer client request `rid`. If `durable`, only after the node's store is synced."""

    rid: int
    result: Result
    durable: bool = False


@dataclass(frozen=True, slots=True)
class Note:
    """Something worth telling a person watching (a node noticed a peer down, a hint delivered)."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DotLeaseSaved:
    """Tell the node, once its store is synced, that its dot lease's `mark` for `actor` is durable
    (core/dot_lease.py). Always durable: that is its point."""

    actor: str
    mark: int
    durable: bool = True


Effect = Send | Respond | Note | DotLeaseSaved
