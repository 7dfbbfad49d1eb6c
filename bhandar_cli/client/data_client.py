"""The data operations (get, put, delete, incr) of a client, over any backend that answers requests.

`DataClient` is what a one-shot command needs, and all it needs: client.py's `Client` adds the
cluster views and operations, whose modules (cluster_views.py, cluster_admin.py and the core modules
they read) a one-shot `get` does not import. It is async, but awaits only its backend's `request`:
one-shot commands run it on a blocking backend whose awaits never suspend, without an event loop
(client/backends/blocking_backend.py). Data operations return outcome dataclasses (`outcomes.py`); every
failure is raised as `ClientError` with a stable `code`.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bhandar_cli.client.forward_note import forward_note
from bhandar_cli.client.outcomes import (
    GetOutcome,
    IncrOutcome,
    SiblingView,
    WriteOutcome,
    counter_parts,
    sibling_views,
)
from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.config import parse_level
from bhandar_cli.core.model.context import BLIND_DELETE_WARNING, decode_context, encode_context
from bhandar_cli.core.model.crdt import PNCounter
from bhandar_cli.core.model.errors import NOT_APPLIED, REFUSED_INPUT, BadInput, ClientError
from bhandar_cli.core.model.limits import check_delta, check_key, check_request_id
from bhandar_cli.core.model.records import Record, Versioned
from bhandar_cli.core.model.versions import context_of
from bhandar_cli.core.protocol.client_messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
)

if TYPE_CHECKING:
    from bhandar_cli.client.backend import RequestBackend
    from bhandar_cli.core.protocol.messages import Result

# The home replicas of a key (keyspace, key) by the client's ring, or None when its replication
# factor is unknown; the full client asks the cluster (cluster_views.py), a one-shot one does not.
ReplicasOf = Callable[[str, str], Awaitable[tuple[str, ...] | None]]


REROUTES = 2  # nodes a request is sent on to after the first failed it (N - 1 for the default N of 3)

# The failures a read goes around (to the key's next live replica): those of a node or of the
# cluster as one coordinator sees it, which the next may not share. Not the caller's (a bad key, a
# token without the role, or past its rate on this node): another node would say the same.
READ_GOES_AROUND: frozenset[str] = frozenset({"unavailable", "unreachable", "timeout", "internal"})


def goes_around(request: Any, failure: Failure, passed: Sequence[Failure]) -> bool:
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


def _failed(request: Any, failure: Failure, passed: list[tuple[str, Failure]]) -> ClientError:
    """The error a request ends with: its last failure, saying which nodes failed it before (and
    how), and for an increment whose outcome is unknown, how to retry it so that it counts once."""
    error = failure.error
    if passed:
        said = [f"{n}, which said the same" if f.error == error else f"{n}: {f.error}" for n, f in passed]
        error += f" (asked first: {'; '.join(said)})"
    if isinstance(request, IncrRequest) and failure.code not in NOT_APPLIED:
        error += (
            f"; the increment may have been applied: retry it with request id {request.request_id} "
            "and it counts once"
        )
    return ClientError(failure.code, error, failure.answered, failure.needed, failure.trace)


class DataClient:
    """get, put, delete and incr, routed to a live replica of the key; remembers each key's last
    context so that a put or delete after a get replaces what it read."""

    def __init__(
        self,
        backend: RequestBackend,
        consistency: str = "QUORUM",
        timeout: float = 5.0,
        replicas_of: ReplicasOf | None = None,
    ) -> None:
        self.backend = backend
        self._replicas = replicas_of
        self.consistency = parse_level(consistency)
        self.timeout = timeout
        self.trace = False
        self._contexts: dict[tuple[str, str], str] = {}  # this session's last get context per key
        self.keys_seen: dict[str, set[str]] = {}

    # --- routing and errors ------------------------------------------------------------------

    def node(self, name: str) -> str:
        """Validate a node name given by a person."""
        wanted = name.strip().upper() if len(name.strip()) == 1 else name.strip()
        if wanted not in self.backend.names:
            raise BadInput(f"unknown node {name!r} (nodes are {', '.join(self.backend.names)})")
        return wanted

    def _via(self, keyspace: str, key: str, via: str | None) -> str:
        if via is not None:
            return self.node(via)
        # Like a partition-aware client: the first live replica of the key, else any live node.
        for name in self.backend.ring.walk(key_token(keyspace, key)):
            if self.backend.is_alive(name):
                return name
        raise ClientError("unavailable", "every node is down; revive one first")

    def _level(self, level: str | None) -> str:
        return self.consistency if level is None else parse_level(level)

    async def call(self, via: str, request: Any, key: tuple[str, str] | None = None) -> Result:
        """Send `request` to `via`; a `Failure` is raised as `ClientError`. A request routed by
        its `key` (no node named by the user) that a node failed goes to the key's next live
        replica when that is safe (`goes_around`), up to REROUTES times: a node stopping for a
        rolling upgrade, or restarting and not yet listening, fails no request. The error of a
        request that failed everywhere names each node it went to."""
        passed: list[tuple[str, Failure]] = []
        while True:
            result = await self.backend.request(via, request, self.timeout)
            if not isinstance(result, Failure):
                return result
            if key is None or not goes_around(request, result, [f for _, f in passed]):
                break
            tried = {via, *(node for node, _ in passed)}
            walk = self.backend.ring.walk(key_token(*key))
            others = [n for n in walk if n not in tried and self.backend.is_alive(n)]
            if not others:
                break
            passed.append((via, result))
            via = others[0]
        raise _failed(request, result, passed)

    def _remember(self, keyspace: str, key: str) -> None:
        # After an answer only: a misspelled keyspace must not become a completion.
        self.keys_seen.setdefault(keyspace, set()).add(key)

    def forget(self, keyspace: str, key: str) -> None:
        """Drop what this session remembers of a key: export and import touch each key once, and
        remembering a million keys would be a million entries for nothing."""
        self._contexts.pop((keyspace, key), None)
        self.keys_seen.get(keyspace, set()).discard(key)

    def _context(self, keyspace: str, key: str, ctx: str | None) -> tuple[dict[str, int] | None, str]:
        if ctx is None or ctx == "auto":
            token = self._contexts.get((keyspace, key))
            return (decode_context(token), "auto") if token else (None, "none")
        if ctx == "none":
            return None, "none"
        return decode_context(ctx), "given"

    # --- data --------------------------------------------------------------------------------

    async def put(
        self,
        keyspace: str,
        key: str,
        value: bytes | None,
        ctype: str,
        ctx: str | None = None,
        level: str | None = None,
        via: str | None = None,
    ) -> WriteOutcome:
        check_key(key)
        context, used = self._context(keyspace, key, ctx)
        lvl = self._level(level)
        node = self._via(keyspace, key, via)
        rid = self.backend.new_rid()
        request = PutRequest(rid, keyspace, key, value, ctype, context, lvl, self.trace)
        result = await self.call(node, request, None if via else (keyspace, key))
        assert isinstance(result, PutResult)
        self._remember(keyspace, key)
        forwarded = await self._forwarded(keyspace, key, via and node, result.coordinator)
        return WriteOutcome(
            "put" if value is not None else "delete",
            keyspace,
            key,
            result.coordinator,
            result.acks,
            result.needed,
            used,
            result.warnings,
            result.hinted,
            result.trace,
            forwarded_by=forwarded[0],
            note=forwarded[1],
        )

    async def delete(
        self,
        keyspace: str,
        key: str,
        ctx: str | None = None,
        level: str | None = None,
        via: str | None = None,
    ) -> WriteOutcome:
        """Delete what was read: with ctx auto (the default) the context of this session's last
        get of the key, else a read now, whose values the outcome lists as removed. ctx=none is the
        blind tombstone, which removes nothing already stored (the outcome warns)."""
        if ctx == "none":
            outcome = await self.put(keyspace, key, None, "", "none", level, via)
            return replace(outcome, warnings=(BLIND_DELETE_WARNING, *outcome.warnings))
        if ctx is not None and ctx != "auto":
            return await self.put(keyspace, key, None, "", ctx, level, via)
        if (keyspace, key) in self._contexts:
            return await self.put(keyspace, key, None, "", "auto", level, via)
        read = await self.get(keyspace, key, level, via)
        outcome = await self.put(keyspace, key, None, "", "auto", level, via)
        return replace(outcome, context_used="read", removed=tuple(read.values))

    async def get(
        self, keyspace: str, key: str, level: str | None = None, via: str | None = None
    ) -> GetOutcome:
        check_key(key)
        lvl = self._level(level)
        node = self._via(keyspace, key, via)
        request = GetRequest(self.backend.new_rid(), keyspace, key, lvl, self.trace)
        result = await self.call(node, request, None if via else (keyspace, key))
        assert isinstance(result, GetResult)
        self._remember(keyspace, key)
        record = result.record
        if isinstance(record, Versioned) or record is None:
            siblings = record.siblings if record is not None else ()
            token = encode_context(context_of(siblings))
            if token:
                self._contexts[(keyspace, key)] = token
            else:
                self._contexts.pop((keyspace, key), None)
            found = any(not s.tombstone for s in siblings)
            return GetOutcome(
                keyspace,
                key,
                found,
                sibling_views(record),
                token,
                result.coordinator,
                result.replies,
                result.needed,
                trace=result.trace,
                dropped=[SiblingView.of(s) for s in result.dropped],
                warnings=result.warnings,
            )
        value, entries = counter_parts(record)
        return GetOutcome(
            keyspace,
            key,
            True,
            [],
            "",
            result.coordinator,
            result.replies,
            result.needed,
            value,
            entries,
            result.trace,
            duplicates=_duplicates(record),
        )

    async def incr(
        self,
        keyspace: str,
        key: str,
        delta: int = 1,
        request_id: str | None = None,
        level: str | None = None,
        via: str | None = None,
    ) -> IncrOutcome:
        check_key(key)
        check_delta(delta)
        if request_id is not None:
            check_request_id(request_id)
        lvl = self._level(level)
        node = self._via(keyspace, key, via)
        rid = request_id or os.urandom(8).hex()  # 16 hex digits, without importing uuid
        request = IncrRequest(self.backend.new_rid(), keyspace, key, delta, rid, lvl, self.trace)
        result = await self.call(node, request, None if via else (keyspace, key))
        assert isinstance(result, IncrResult)
        self._remember(keyspace, key)
        by, note = await self._forwarded(keyspace, key, via and node, result.coordinator)
        return IncrOutcome(
            keyspace,
            key,
            result.value,
            rid,
            result.coordinator,
            result.acks,
            result.needed,
            result.trace,
            forwarded_by=by,
            note=note,
        )

    async def _forwarded(
        self, keyspace: str, key: str, asked: str | None, coordinator: str
    ) -> tuple[str, str]:
        """(the node asked, why it did not coordinate) for a write sent via= a node that
        forwarded it; ("", "") when it coordinated itself or no node was asked."""
        if not asked or not coordinator or asked == coordinator:
            return "", ""
        return asked, forward_note(asked, coordinator, keyspace, key, await self._replicas_of(keyspace, key))

    async def _replicas_of(self, keyspace: str, key: str) -> tuple[str, ...] | None:
        """The key's home replicas by this client's ring; None when its replication is unknown
        (a one-shot client does not ask; `Client` hands over its views' way to)."""
        return None if self._replicas is None else await self._replicas(keyspace, key)


def _duplicates(record: Record | None) -> int:
    """How much a counter's P/N table over-counts (retried ids applied by two replicas)."""
    if not isinstance(record, PNCounter):
        return 0
    return sum(p - n for p, n in record.entries().values()) - record.value
