"""What a node waits on (a *pending*), one frozen record per kind, and how a waiting client is
answered.

`Pending` is a tagged union: `PendingPut` (a put or delete this node coordinates), `PendingIncr`,
`PendingRead`, `PendingForward` (a request handed to another coordinator), `PendingHandoff` (one
hint on its way to a replica) and `PendingOwnership` (a record of a key this node no longer
replicates, on its way to a replica of it). Each has exactly the fields of its kind, fixed when it
starts. What changes while a client's request waits (the replicas that acknowledged or answered,
those that refused, whether the client has its answer) lives in the small mutable progress object
the pending holds, and the steps of a traced request in its `Trace`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from bhandar_cli.core.model import Record
from bhandar_cli.core.protocol.client_messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
)
from bhandar_cli.core.protocol.messages import ClientReply, ClientRequest, Effect, Respond, Result, Send


class Trace:
    """The steps of a request whose client asked for a trace, in milliseconds since it arrived."""

    __slots__ = ("started", "steps")

    def __init__(self, started: float) -> None:
        self.started = started
        self.steps: list[tuple[float, str]] = []

    def note(self, now: float, text: str) -> None:
        self.steps.append((round((now - self.started) * 1000.0, 3), text))


@dataclass(slots=True)
class WriteProgress:
    """What a write learns while it waits: who stored it, who refused (and why), and whether the
    client has been answered (the op stays until every target replied or it times out)."""

    acks: set[str]
    failed: dict[str, str] = field(default_factory=dict)
    answered: bool = False


@dataclass(slots=True)
class ReadProgress:
    """What a read learns while it waits: each replica's answer, and whether the client has been
    answered (the op keeps listening for slower replicas, to repair them)."""

    replies: dict[str, Record | None] = field(default_factory=dict)
    answered: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingPut:
    """A put or delete this node coordinates: answered once `needed` targets stored it."""

    verb: str  # put or delete
    rid: int  # the client request to answer
    origin: str | None  # the node that forwarded the request, None for a local client
    started: float
    deadline: float
    level: str
    keyspace: str
    key: str
    needed: int
    targets: tuple[str, ...]  # every replica written to, pending (future) replicas included
    hinted: tuple[str, ...]  # "E for D": fallbacks that take a hint
    warnings: tuple[str, ...]
    trace: Trace | None
    progress: WriteProgress
    exact: bool = False  # under the exact dot its forwarder minted: the answer says it was stored


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingIncr:
    """An increment this node coordinates: answered with `value` once `needed` targets stored it."""

    rid: int
    origin: str | None
    started: float
    deadline: float
    level: str
    keyspace: str
    key: str
    needed: int
    targets: tuple[str, ...]
    value: int  # the counter's value after this increment, as the coordinator merged it
    trace: Trace | None
    progress: WriteProgress

    @property
    def verb(self) -> str:
        return "incr"


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingRead:
    """A get this node coordinates: answered after `needed` replies, then repairs stale replicas."""

    rid: int
    origin: str | None
    started: float
    deadline: float
    level: str
    keyspace: str
    key: str
    needed: int
    targets: tuple[str, ...]
    fallbacks: frozenset[str]  # targets standing in for a down home replica: never read-repaired
    trace: Trace | None
    progress: ReadProgress

    @property
    def verb(self) -> str:
        return "get"


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingForward:
    """A client request this node handed to `target` to coordinate; its answer is relayed back.

    If `target` does not answer by `deadline`, the coordinator may fall back to another replica:
    `request` is the request as this node received it, `tried` every coordinator asked so far
    (`target` last), `sent` when it was handed to `target` (to place `target`'s trace in ours).
    """

    rid: int
    origin: str | None
    deadline: float
    target: str
    request: PutRequest | IncrRequest
    tried: tuple[str, ...]
    sent: float
    trace: Trace | None
    why: str = ""  # why this node did not coordinate it: the reply tells the client (forward_reason)


@dataclass(frozen=True, slots=True)
class PendingHandoff:
    """One hint for `target` sent to a replica; removed from the queue once that replica has it."""

    deadline: float
    target: str
    keyspace: str
    key: str
    record: Record


@dataclass(frozen=True, slots=True)
class PendingOwnership:
    """A record of a key this node no longer replicates, sent to `target`, a replica of it."""

    deadline: float
    target: str
    keyspace: str
    key: str
    digest: bytes  # of the record sent: an acknowledgement counts only if it has not changed since


PendingWrite = PendingPut | PendingIncr
PendingRequest = PendingPut | PendingIncr | PendingRead
Pending = PendingPut | PendingIncr | PendingRead | PendingForward | PendingHandoff | PendingOwnership


def answer(
    rid: int, origin: str | None, result: Result, durable: bool = False, stored: bool | None = None
) -> Effect:
    """The effect that answers client request `rid`: to a local client, or back to the node that
    forwarded it (`stored`: see `ClientReply`)."""
    if origin is None:
        return Respond(rid, result, durable)
    return Send(origin, ClientReply(rid, result, stored), durable)


def refuse(req: ClientRequest, origin: str | None, failure: Failure) -> Effect:
    """Answer a request that failed before any replica was asked (too few replicas reachable, a
    refused hint or sibling limit, input the store refuses): a put under an exact dot was not
    stored. The node the client sent it to counts it when the answer reaches the client
    (host/executor.py)."""
    exact = isinstance(req, PutRequest) and req.dot is not None
    return answer(req.rid, origin, failure, stored=False if exact else None)


def counted_as(req: ClientRequest) -> tuple[str, str] | None:
    """The (operation, consistency level) a data request is counted under in the metrics (None:
    not a data request: keyspace, repair and decommission requests are not counted)."""
    if isinstance(req, GetRequest):
        return "get", req.consistency
    if isinstance(req, IncrRequest):
        return "incr", req.consistency
    if isinstance(req, PutRequest):
        return ("delete" if req.value is None else "put"), req.consistency
    return None


def finish(
    now: float,
    op: PendingRequest,
    result: PutResult | IncrResult | GetResult | Failure,
    durable: bool = False,
    stored: bool = True,
) -> Effect:
    """Answer the client of `op`, closing its trace (the node the client sent it to counts it).
    A put under an exact dot says whether it was `stored` here (by default it was)."""
    if op.trace is not None:
        op.trace.note(
            now, f"failed: {result.error}" if isinstance(result, Failure) else "answered the client"
        )
        result = replace(result, trace=tuple(op.trace.steps))
    exact = isinstance(op, PendingPut) and op.exact
    return answer(op.rid, op.origin, result, durable, stored if exact else None)
