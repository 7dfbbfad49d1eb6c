"""One client's session as a pure state machine: results in, requests out (the h11 idea applied
to the client).

`ClientSession` owns what a client remembers between its data operations: the context of its last
read of each key. Each data operation (get, put, delete, incr) is an `Exchange`: `start` gives
the first request to send (`SendRequest`, to a node), `receive` takes that node's result and gives
the next `SendRequest` (the same request to the key's next live replica, or a delete's write after
its read), or how the operation ended (`Done`, `Failed`). It decides the node (the first live
replica of the key, unless the caller names one), when a failed request may go around to another
(`goes_around`), a delete's read first, and which context a write carries; whoever drives it does
the I/O: the data client (client/data_client.py), the HTTP gateway (node/http/api.py), the soak
(soak/load.py) and the chaos workload (sim/chaos/workload.py), so every chaos seed runs the
client code users run.

Synchronous and deterministic: it is handed the cluster's view (`ClusterView`: the ring and which
nodes are up) at each step and a function for request ids; it never reads a clock or a socket.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bhandar_cli.core.membership import key_token
from bhandar_cli.core.model import (
    BLIND_DELETE_WARNING,
    NOT_APPLIED,
    REFUSED_INPUT,
    ClientError,
    Sibling,
    Versioned,
    context_of,
    decode_context,
)
from bhandar_cli.core.protocol import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
)

if TYPE_CHECKING:
    from bhandar_cli.core.membership import Ring

DataRequest = GetRequest | PutRequest | IncrRequest
DataResult = GetResult | PutResult | IncrResult

REROUTES = 2  # nodes a request is sent on to after the first failed it (N - 1 for the default N of 3)

# The failures a read goes around (to the key's next live replica): those of a node or of the
# cluster as one coordinator sees it, which the next may not share. Not the caller's (a bad key, a
# token without the role, or past its rate on this node): another node would say the same.
READ_GOES_AROUND: frozenset[str] = frozenset({"unavailable", "unreachable", "timeout", "internal"})

EVERY_NODE_DOWN = Failure("unavailable", "every node is down; revive one first")


class ClusterView(Protocol):
    """What the session needs to know of the cluster at a step: its ring and who is up."""

    @property
    def ring(self) -> Ring: ...
    def is_alive(self, name: str) -> bool: ...


def goes_around(request: DataRequest, failure: Failure, passed: Sequence[Failure]) -> bool:
    """Whether a request that failed with `failure`, after the failures `passed` of the nodes it
    went to before, may be sent to another node.

    A write only when the failure promises nothing was written (`NOT_APPLIED`, core/model/
    errors.py: the node was not listening, was stopping, was down or overloaded, or its coordinator
    found too few replicas reachable), and not for input the store refuses, which every node
    refuses. After any other failure (a timeout, a connection lost once the request was sent) the
    outcome is unknown: a second coordinator could apply it twice, and an increment would count
    twice. A read changes nothing: it goes around any failure of the cluster's (`READ_GOES_AROUND`).
    A request no coordinator took (its `coordinator` is empty) goes on up to REROUTES times; a
    coordinator's own verdict (too few replicas, as it sees them) is asked of one more coordinator
    only, so that an outage does not multiply each request by the nodes it is sent to."""
    if len(passed) >= REROUTES:
        return False
    if failure.coordinator and any(f.coordinator for f in passed):
        return False
    if isinstance(request, GetRequest):
        return failure.code in READ_GOES_AROUND
    return failure.code in NOT_APPLIED and failure.code not in REFUSED_INPUT


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Send `request` to `node` and hand its result (or a `Failure`) to `Exchange.receive`."""

    node: str
    request: DataRequest


@dataclass(frozen=True, slots=True)
class Done:
    """An operation that completed: its last result and what the session adds to it."""

    result: DataResult
    context_used: str = ""  # a write's: "none", "auto", "given" or "read" (a delete read first)
    read: GetResult | None = None  # a delete that read the key first: that read
    warnings: tuple[str, ...] = ()  # the session's, then the result's
    forwarded_by: str = ""  # the node asked (`via`), when another node coordinated the write
    forward_reason: str = ""  # why it did not coordinate: its own words when it said them

    @property
    def removed(self) -> tuple[Sibling, ...] | None:
        """A delete that read first: the stored versions its write removes; None when unknown."""
        if self.read is None:
            return None
        record = self.read.record
        siblings = record.siblings if isinstance(record, Versioned) else ()
        return tuple(s for s in siblings if not s.tombstone)


@dataclass(frozen=True, slots=True)
class Failed:
    """An operation that failed: its last failure, and the nodes that failed it before."""

    request: DataRequest
    failure: Failure
    passed: tuple[tuple[str, Failure], ...] = ()

    def error(self) -> ClientError:
        """The error a person reads: the last failure, saying which nodes failed it before (and
        how), and for an increment whose outcome is unknown, how to retry it so it counts once."""
        failure, text = self.failure, self.failure.error
        if self.passed:
            said = [
                f"{n}, which said the same" if f.error == failure.error else f"{n}: {f.error}"
                for n, f in self.passed
            ]
            text += f" (asked first: {'; '.join(said)})"
        if isinstance(self.request, IncrRequest) and failure.code not in NOT_APPLIED:
            text += (
                f"; the increment may have been applied: retry it with request id "
                f"{self.request.request_id} and it counts once"
            )
        return ClientError(failure.code, text, failure.answered, failure.needed, failure.trace)


Step = SendRequest | Done | Failed


class ClientSession:
    """What one client remembers between operations: each key's last read context. Its methods
    start an operation (an `Exchange`); they send nothing."""

    def __init__(self, new_rid: Callable[[], int]) -> None:
        self.new_rid = new_rid
        self._contexts: dict[tuple[str, str], dict[str, int]] = {}

    def context(self, keyspace: str, key: str) -> dict[str, int] | None:
        """The context of this session's last read of the key (None: none remembered)."""
        return self._contexts.get((keyspace, key))

    def forget(self, keyspace: str, key: str) -> None:
        """Drop what the session remembers of a key (an export touches each key once)."""
        self._contexts.pop((keyspace, key), None)

    def learn(self, keyspace: str, key: str, result: GetResult) -> None:
        """Remember the context a read of the key returned (forget it when the read found none)."""
        record = result.record
        if record is not None and not isinstance(record, Versioned):
            return  # a counter has no context
        context = context_of(record.siblings) if record is not None else {}
        if context:
            self._contexts[(keyspace, key)] = context
        else:
            self._contexts.pop((keyspace, key), None)

    def get(
        self, keyspace: str, key: str, *, level: str, via: str | None = None, trace: bool = False
    ) -> Exchange:
        return Exchange(self, GetRequest(self.new_rid(), keyspace, key, level, trace), via)

    def put(
        self,
        keyspace: str,
        key: str,
        value: bytes | None,
        ctype: str,
        *,
        context: str | None = None,
        level: str,
        via: str | None = None,
        trace: bool = False,
    ) -> Exchange:
        """A put (a delete when `value` is None) with `context`: None or "auto" for the session's
        last read of the key (none remembered: blind), "none" for a blind write, else a context
        string."""
        if context is None or context == "auto":
            remembered = self._contexts.get((keyspace, key))
            chosen, used = (dict(remembered), "auto") if remembered else (None, "none")
        elif context == "none":
            chosen, used = None, "none"
        else:
            chosen, used = decode_context(context), "given"
        request = PutRequest(self.new_rid(), keyspace, key, value, ctype, chosen, level, trace)
        return Exchange(self, request, via, context_used=used)

    def delete(
        self,
        keyspace: str,
        key: str,
        *,
        context: str | None = None,
        level: str,
        via: str | None = None,
        trace: bool = False,
    ) -> Exchange:
        """Delete what was read: with context None or "auto" the context of this session's last
        read of the key, else a read now (`Done.read`, `Done.removed`). "none" is the blind
        tombstone, which removes nothing already stored (the outcome warns)."""
        if context == "none":
            exchange = self.put(keyspace, key, None, "", context="none", level=level, via=via, trace=trace)
            exchange.warnings = (BLIND_DELETE_WARNING,)
            return exchange
        if context not in (None, "auto") or (keyspace, key) in self._contexts:
            return self.put(keyspace, key, None, "", context=context, level=level, via=via, trace=trace)
        read = GetRequest(self.new_rid(), keyspace, key, level, trace)
        return Exchange(self, read, via, context_used="read", then_delete=True)

    def incr(
        self,
        keyspace: str,
        key: str,
        delta: int,
        request_id: str,
        *,
        level: str,
        via: str | None = None,
        trace: bool = False,
    ) -> Exchange:
        """Add `delta`; a retry passes the same `request_id` so that it counts once."""
        request = IncrRequest(self.new_rid(), keyspace, key, delta, request_id, level, trace)
        return Exchange(self, request, via)


class Exchange:
    """One data operation in flight: which request goes to which node next, until it ends."""

    def __init__(
        self,
        session: ClientSession,
        request: DataRequest,
        via: str | None,
        *,
        context_used: str = "",
        then_delete: bool = False,
    ) -> None:
        self.session = session
        self.request = request
        self.via = via  # named by the caller: the request goes there and nowhere else
        self.context_used = context_used
        self.then_delete = then_delete  # a read before a delete: the delete follows it
        self.warnings: tuple[str, ...] = ()
        self.node = ""  # where the request in flight went
        self.read: GetResult | None = None
        self._passed: list[tuple[str, Failure]] = []

    def start(self, view: ClusterView | None) -> SendRequest | Failed:
        """The first request to send, or `Failed` when no node can take it. `view` may be None
        only when the caller named the node (`via`): the HTTP gateway asks its own node."""
        return self._send_first(view)

    def _send_first(self, view: ClusterView | None) -> SendRequest | Failed:
        self._passed = []
        if self.via is not None:
            self.node = self.via
            return SendRequest(self.via, self.request)
        if view is None:
            raise ValueError("an exchange with no node named needs the cluster's view")
        # Like a partition-aware client: the first live replica of the key, else any live node.
        for name in view.ring.walk(key_token(self.request.keyspace, self.request.key)):
            if view.is_alive(name):
                self.node = name
                return SendRequest(name, self.request)
        return Failed(self.request, EVERY_NODE_DOWN)

    def receive(self, result: DataResult | Failure, view: ClusterView | None) -> Step:
        """The answer of the node the last `SendRequest` went to; the next step."""
        if isinstance(result, Failure):
            return self._failed(result, view)
        request = self.request
        if isinstance(result, GetResult):
            self.session.learn(request.keyspace, request.key, result)
            if self.then_delete:
                return self._delete_after(result, view)
            return Done(result, warnings=result.warnings)
        warnings = (*self.warnings, *result.warnings) if isinstance(result, PutResult) else self.warnings
        asked = self.node if self.via is not None else ""
        forwarded = bool(asked) and bool(result.coordinator) and asked != result.coordinator
        reason = ""
        if forwarded:
            reason = result.forward_reason or (
                f"{asked} did not coordinate the write to {request.keyspace}/{request.key}: it "
                f"forwarded to {result.coordinator}"  # an older node does not say why
            )
        return Done(
            result,
            context_used=self.context_used,
            read=self.read,
            warnings=warnings,
            forwarded_by=asked if forwarded else "",
            forward_reason=reason,
        )

    def _delete_after(self, read: GetResult, view: ClusterView | None) -> SendRequest | Failed:
        """The read of a delete came back: write the tombstone over what it found."""
        request = self.request
        self.read, self.then_delete = read, False
        context = self.session.context(request.keyspace, request.key)
        self.request = PutRequest(
            self.session.new_rid(),
            request.keyspace,
            request.key,
            None,
            "",
            dict(context) if context else None,
            request.consistency,
            request.trace,
        )
        return self._send_first(view)

    def _failed(self, failure: Failure, view: ClusterView | None) -> SendRequest | Failed:
        """Go around a failed node to the key's next live replica when that is safe (a node
        stopping for a rolling upgrade, or restarting and not yet listening, fails no request),
        else end with the failure, which names each node the request went to."""
        passed = [f for _, f in self._passed]
        if self.via is None and view is not None and goes_around(self.request, failure, passed):
            tried = {self.node, *(node for node, _ in self._passed)}
            walk = view.ring.walk(key_token(self.request.keyspace, self.request.key))
            others = [n for n in walk if n not in tried and view.is_alive(n)]
            if others:
                self._passed.append((self.node, failure))
                self.node = others[0]
                return SendRequest(self.node, self.request)
        return Failed(self.request, failure, tuple(self._passed))
