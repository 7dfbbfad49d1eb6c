"""The data operations (get, put, delete, incr) of a client, over any backend that answers requests.

`DataClient` is what a one-shot command needs, and all it needs: client.py's `Client` adds the
cluster views and operations, whose modules (cluster_views.py, cluster_admin.py and the core modules
they read) a one-shot `get` does not import. It is async, but awaits only its backend's `request`:
one-shot commands run it on a blocking backend whose awaits never suspend, without an event loop
(client/backends/blocking_backend.py). What a data operation sends where, the contexts it remembers,
going around a failed node and a delete's read are the client session's (core/session/
client_session.py): `DataClient` asks it what to send, sends it through the backend and hands the
result back. Data operations return outcome dataclasses (`outcomes.py`); every failure is raised as
`ClientError` with a stable `code`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from bhandar_cli.client.outcomes import (
    GetOutcome,
    IncrOutcome,
    SiblingView,
    WriteOutcome,
    counter_parts,
    sibling_views,
)
from bhandar_cli.core.model import (
    BadInput,
    ClientError,
    PNCounter,
    Record,
    Versioned,
    check_delta,
    check_key,
    check_request_id,
    decode_value,
    encode_context,
    parse_level,
)
from bhandar_cli.core.protocol import Failure, GetResult, IncrResult, PutResult
from bhandar_cli.core.session import ClientSession, Done, Exchange, Failed, SendRequest

if TYPE_CHECKING:
    from bhandar_cli.client.backend import RequestBackend
    from bhandar_cli.core.protocol import Result


class DataClient:
    """get, put, delete and incr, routed to a live replica of the key; remembers each key's last
    context so that a put or delete after a get replaces what it read (its `session`)."""

    def __init__(self, backend: RequestBackend, consistency: str = "QUORUM", timeout: float = 5.0) -> None:
        self.backend = backend
        self.consistency = parse_level(consistency)
        self.timeout = timeout
        self.trace = False
        self.session = ClientSession(backend.new_rid)
        self.keys_seen: dict[str, set[str]] = {}

    def node(self, name: str) -> str:
        """Validate a node name given by a person."""
        wanted = name.strip().upper() if len(name.strip()) == 1 else name.strip()
        if wanted not in self.backend.names:
            raise BadInput(f"unknown node {name!r} (nodes are {', '.join(self.backend.names)})")
        return wanted

    def _level(self, level: str | None) -> str:
        return self.consistency if level is None else parse_level(level)

    async def call(self, via: str, request: Any) -> Result:
        """SendRequest a request that is not a data operation (a keyspace's definition) to `via`; a
        `Failure` is raised as `ClientError`."""
        result = await self.backend.request(via, request, self.timeout)
        if isinstance(result, Failure):
            raise ClientError(result.code, result.error, result.answered, result.needed, result.trace)
        return result

    async def run(self, exchange: Exchange) -> Done:
        """Drive one operation of the session: send what it asks to the node it names, hand each
        result back, until it is done (a failure is raised as `ClientError`)."""
        step: SendRequest | Done | Failed = exchange.start(self.backend)
        while isinstance(step, SendRequest):
            result = await self.backend.request(step.node, step.request, self.timeout)
            if not isinstance(result, PutResult | GetResult | IncrResult | Failure):
                raise ClientError(
                    "internal", f"{step.node} answered a data request with {type(result).__name__}"
                )
            step = exchange.receive(result, self.backend)
        if isinstance(step, Failed):
            raise step.error()
        return step

    def _remember(self, keyspace: str, key: str) -> None:
        # After an answer only: a misspelled keyspace must not become a completion.
        self.keys_seen.setdefault(keyspace, set()).add(key)

    def forget(self, keyspace: str, key: str) -> None:
        """Drop what this client remembers of a key: export and import touch each key once, and
        remembering a million keys would be a million entries for nothing."""
        self.session.forget(keyspace, key)
        self.keys_seen.get(keyspace, set()).discard(key)

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
        exchange = self.session.put(
            keyspace,
            key,
            value,
            ctype,
            context=ctx,
            level=self._level(level),
            via=self._named(via),
            trace=self.trace,
        )
        return self._written(
            "put" if value is not None else "delete", keyspace, key, await self.run(exchange)
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
        check_key(key)
        exchange = self.session.delete(
            keyspace, key, context=ctx, level=self._level(level), via=self._named(via), trace=self.trace
        )
        return self._written("delete", keyspace, key, await self.run(exchange))

    def _named(self, via: str | None) -> str | None:
        return None if via is None else self.node(via)

    def _written(self, cmd: str, keyspace: str, key: str, done: Done) -> WriteOutcome:
        result = done.result
        assert isinstance(result, PutResult)
        self._remember(keyspace, key)
        gone = done.removed
        removed = None if gone is None else tuple(decode_value(s.value, s.ctype) for s in gone)
        return WriteOutcome(
            cmd=cmd,
            keyspace=keyspace,
            key=key,
            coordinator=result.coordinator,
            acks=result.acks,
            needed=result.needed,
            context_used=done.context_used,
            warnings=done.warnings,
            hinted=result.hinted,
            trace=result.trace,
            removed=removed,
            forwarded_by=done.forwarded_by,
            note=done.forward_reason,
        )

    async def get(
        self, keyspace: str, key: str, level: str | None = None, via: str | None = None
    ) -> GetOutcome:
        check_key(key)
        exchange = self.session.get(
            keyspace, key, level=self._level(level), via=self._named(via), trace=self.trace
        )
        result = (await self.run(exchange)).result
        assert isinstance(result, GetResult)
        self._remember(keyspace, key)
        record = result.record
        if isinstance(record, Versioned) or record is None:
            siblings = record.siblings if record is not None else ()
            context = self.session.context(keyspace, key)
            return GetOutcome(
                keyspace=keyspace,
                key=key,
                found=any(not s.tombstone for s in siblings),
                siblings=sibling_views(record),
                context=encode_context(context) if context else "",
                coordinator=result.coordinator,
                replies=result.replies,
                needed=result.needed,
                trace=result.trace,
                dropped=[SiblingView.of(s) for s in result.dropped],
                warnings=result.warnings,
            )
        value, entries = counter_parts(record)
        return GetOutcome(
            keyspace=keyspace,
            key=key,
            found=True,
            siblings=[],
            context="",
            coordinator=result.coordinator,
            replies=result.replies,
            needed=result.needed,
            counter=value,
            counter_entries=entries,
            trace=result.trace,
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
        rid = request_id or os.urandom(8).hex()  # 16 hex digits, without importing uuid
        exchange = self.session.incr(
            keyspace, key, delta, rid, level=self._level(level), via=self._named(via), trace=self.trace
        )
        done = await self.run(exchange)
        result = done.result
        assert isinstance(result, IncrResult)
        self._remember(keyspace, key)
        return IncrOutcome(
            keyspace=keyspace,
            key=key,
            value=result.value,
            request_id=rid,
            coordinator=result.coordinator,
            acks=result.acks,
            needed=result.needed,
            trace=result.trace,
            forwarded_by=done.forwarded_by,
            note=done.forward_reason,
        )


def _duplicates(record: Record | None) -> int:
    """How much a counter's P/N table over-counts (retried ids applied by two replicas)."""
    if not isinstance(record, PNCounter):
        return 0
    return sum(p - n for p, n in record.entries().values()) - record.value
