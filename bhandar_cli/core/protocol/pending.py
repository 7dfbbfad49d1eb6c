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

from dataclasses import dataclass
from typing import ClassVar, Final, final

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
from bhandar_cli.core.protocol.value_fields import ValueClass, replaced


class Trace:
    """The steps of a request whose client asked for a trace, in milliseconds since it arrived."""

    __slots__ = ("started", "steps")

    def __init__(self, started: float) -> None:
        self.started = started
        self.steps: list[tuple[float, str]] = []

    def note(self, now: float, text: str) -> None:
        self.steps.append((round((now - self.started) * 1000.0, 3), text))


@final
class WriteProgress(ValueClass):
    """What a write learns while it waits: who stored it, who refused (and why), and whether the
    client has been answered (the op stays until every target replied or it times out)."""

    __match_args__: ClassVar = ("acks", "failed", "answered")
    __slots__ = ("acks", "answered", "failed")

    def __init__(self, acks: set[str], failed: dict[str, str] | None = None, answered: bool = False) -> None:
        self.acks: set[str] = acks
        self.failed: dict[str, str] = dict() if failed is None else failed
        self.answered: bool = answered

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was: unhashable


@final
class ReadProgress(ValueClass):
    """What a read learns while it waits: each replica's answer, and whether the client has been
    answered (the op keeps listening for slower replicas, to repair them)."""

    __match_args__: ClassVar = ("replies", "answered")
    __slots__ = ("answered", "replies")

    def __init__(self, replies: dict[str, Record | None] | None = None, answered: bool = False) -> None:
        self.replies: dict[str, Record | None] = dict() if replies is None else replies
        self.answered: bool = answered

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was: unhashable


@final
class PendingPut(ValueClass):
    """A put or delete this node coordinates: answered once `needed` targets stored it."""

    __match_args__: ClassVar = (
        "verb",
        "rid",
        "origin",
        "started",
        "deadline",
        "level",
        "keyspace",
        "key",
        "needed",
        "targets",
        "hinted",
        "warnings",
        "trace",
        "progress",
        "exact",
    )
    __slots__ = (
        "deadline",
        "exact",
        "hinted",
        "key",
        "keyspace",
        "level",
        "needed",
        "origin",
        "progress",
        "rid",
        "started",
        "targets",
        "trace",
        "verb",
        "warnings",
    )

    def __init__(
        self,
        *,
        verb: str,
        rid: int,
        origin: str | None,
        started: float,
        deadline: float,
        level: str,
        keyspace: str,
        key: str,
        needed: int,
        targets: tuple[str, ...],
        hinted: tuple[str, ...],
        warnings: tuple[str, ...],
        trace: Trace | None,
        progress: WriteProgress,
        exact: bool = False,
    ) -> None:
        self.verb: Final = verb  # put or delete
        self.rid: Final = rid  # the client request to answer
        self.origin: Final = origin  # the node that forwarded the request, None for a local client
        self.started: Final = started
        self.deadline: Final = deadline
        self.level: Final = level
        self.keyspace: Final = keyspace
        self.key: Final = key
        self.needed: Final = needed
        self.targets: Final = targets  # every replica written to, pending (future) replicas included
        self.hinted: Final = hinted  # "E for D": fallbacks that take a hint
        self.warnings: Final = warnings
        self.trace: Final = trace
        self.progress: Final = progress
        self.exact: Final = exact  # under the exact dot its forwarder minted: the answer says it was stored


@final
class PendingIncr(ValueClass):
    """An increment this node coordinates: answered with `value` once `needed` targets stored it."""

    __match_args__: ClassVar = (
        "rid",
        "origin",
        "started",
        "deadline",
        "level",
        "keyspace",
        "key",
        "needed",
        "targets",
        "value",
        "trace",
        "progress",
    )
    __slots__ = (
        "deadline",
        "key",
        "keyspace",
        "level",
        "needed",
        "origin",
        "progress",
        "rid",
        "started",
        "targets",
        "trace",
        "value",
    )

    def __init__(
        self,
        *,
        rid: int,
        origin: str | None,
        started: float,
        deadline: float,
        level: str,
        keyspace: str,
        key: str,
        needed: int,
        targets: tuple[str, ...],
        value: int,
        trace: Trace | None,
        progress: WriteProgress,
    ) -> None:
        self.rid: Final = rid
        self.origin: Final = origin
        self.started: Final = started
        self.deadline: Final = deadline
        self.level: Final = level
        self.keyspace: Final = keyspace
        self.key: Final = key
        self.needed: Final = needed
        self.targets: Final = targets
        self.value: Final = value  # the counter's value after this increment, as the coordinator merged it
        self.trace: Final = trace
        self.progress: Final = progress

    @property
    def verb(self) -> str:
        return "incr"


@final
class PendingRead(ValueClass):
    """A get this node coordinates: answered after `needed` replies, then repairs stale replicas."""

    __match_args__: ClassVar = (
        "rid",
        "origin",
        "started",
        "deadline",
        "level",
        "keyspace",
        "key",
        "needed",
        "targets",
        "fallbacks",
        "trace",
        "progress",
    )
    __slots__ = (
        "deadline",
        "fallbacks",
        "key",
        "keyspace",
        "level",
        "needed",
        "origin",
        "progress",
        "rid",
        "started",
        "targets",
        "trace",
    )

    def __init__(
        self,
        *,
        rid: int,
        origin: str | None,
        started: float,
        deadline: float,
        level: str,
        keyspace: str,
        key: str,
        needed: int,
        targets: tuple[str, ...],
        fallbacks: frozenset[str],
        trace: Trace | None,
        progress: ReadProgress,
    ) -> None:
        self.rid: Final = rid
        self.origin: Final = origin
        self.started: Final = started
        self.deadline: Final = deadline
        self.level: Final = level
        self.keyspace: Final = keyspace
        self.key: Final = key
        self.needed: Final = needed
        self.targets: Final = targets
        self.fallbacks: Final = fallbacks  # targets standing in for a down home replica: never read-repaired
        self.trace: Final = trace
        self.progress: Final = progress

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
        result = replaced(result, trace=tuple(op.trace.steps))
    exact = isinstance(op, PendingPut) and op.exact
    return answer(op.rid, op.origin, result, durable, stored if exact else None)
