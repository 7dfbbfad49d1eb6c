"""The one client API the REPL and the CLI use, over an in-process cluster or node processes.

`DataClient` holds the data operations (get, put, delete, incr) and needs only a backend that
answers requests; `Client` adds the cluster views and operations. Both are async: `Client` runs
inside trio, and one-shot commands run a `DataClient` on a blocking backend whose awaits never
suspend, without an event loop (node/blocking_backend.py), which is why trio is imported here
only where it is used. Data operations return outcome dataclasses (`outcomes.py`); cluster views
return dictionaries in the JSON shapes of the man page's JSON OUTPUT. Every failure is raised as
`ClientError` with a stable `code`.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Protocol

from bhandar_cli.client_ops import ClusterOps
from bhandar_cli.client_views import ClusterViews
from bhandar_cli.core.config import KeyspaceDef, parse_level, parse_ttl
from bhandar_cli.core.context import BLIND_DELETE_WARNING, decode_context, encode_context
from bhandar_cli.core.crdt import PNCounter
from bhandar_cli.core.errors import BadInput, BhandarError
from bhandar_cli.core.limits import check_delta, check_key, check_request_id
from bhandar_cli.core.messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    KeyspaceRequest,
    KeyspaceResult,
    PutRequest,
    PutResult,
    Result,
)
from bhandar_cli.core.records import Record, Versioned
from bhandar_cli.core.ring import Ring, key_token
from bhandar_cli.core.versions import context_of
from bhandar_cli.forwarding import forward_note
from bhandar_cli.outcomes import (
    ClientError,
    GetOutcome,
    IncrOutcome,
    SiblingView,
    WriteOutcome,
    counter_parts,
    sibling_views,
)


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
    async def request(self, via: str, request: Any, timeout: float) -> Result: ...


class Backend(RequestBackend, Protocol):
    """What the whole client needs: views of each node, faults, membership and storage changes."""

    async def node_info(self, name: str, counts: bool = True) -> dict[str, Any]: ...
    async def node_records(
        self, name: str, keyspace: str, key: str
    ) -> tuple[Record | None, Record | None]: ...
    async def node_hints(self, name: str) -> list[dict[str, Any]]: ...
    async def node_metrics(self, name: str) -> Any: ...
    async def kill(self, name: str) -> bool: ...
    async def revive(self, name: str) -> bool: ...
    async def partition(self, groups: list[list[str]]) -> list[list[str]]: ...
    async def heal(self) -> None: ...
    async def delay(self, name: str, ms: float) -> None: ...
    async def convergence_problems(self) -> list[str]: ...
    async def node_members(self, name: str) -> list[dict[str, Any]]: ...
    async def node_tree(self, name: str, keyspace: str, lo: int, hi: int) -> list[list[Any]]: ...
    async def drain_notes(self) -> list[tuple[str, dict[str, Any], str]]: ...
    async def add_node(self, name: str, zone: str | None) -> str: ...
    async def flush(self, name: str) -> dict[str, Any]: ...
    async def compact(self, name: str) -> dict[str, Any]: ...
    async def snapshot(self, snapshot: str, to: str | None = None) -> dict[str, Any]: ...
    async def restore(self, snapshot: str, until: float | None = None) -> dict[str, Any]: ...


REROUTES = 2  # replicas a request refused unrun is sent on to (N - 1 for the default N of 3)


class DataClient:
    """get, put, delete and incr, routed to a live replica of the key; remembers each key's last
    context so that a put or delete after a get replaces what it read."""

    def __init__(self, backend: RequestBackend, consistency: str = "QUORUM", timeout: float = 5.0) -> None:
        self.backend = backend
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

    async def _call(self, via: str, request: Any, key: tuple[str, str] | None = None) -> Result:
        """Send `request` to `via`. With the `key` it is routed by (no node named by the user), a
        request a node refused without running it (stopping, or not listening: the backend's
        `not_run`) goes to the key's next live replica, so a rolling restart fails no request."""
        tried: list[str] = []
        while True:
            result = await self.backend.request(via, request, self.timeout)
            not_run = getattr(self.backend, "not_run", None)
            if not (isinstance(result, Failure) and key is not None and not_run is not None):
                break
            if not not_run(request.rid) or len(tried) >= REROUTES:
                break
            tried.append(via)
            token = key_token(*key)
            others = [n for n in self.backend.ring.walk(token) if n not in tried and self.backend.is_alive(n)]
            if not others:
                break
            via = others[0]
        if isinstance(result, Failure):
            raise ClientError(result.code, result.error, result.answered, result.needed, result.trace)
        return result

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
        result = await self._call(node, request, None if via else (keyspace, key))
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
        result = await self._call(node, request, None if via else (keyspace, key))
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
        result = await self._call(node, request, None if via else (keyspace, key))
        assert isinstance(result, IncrResult)
        self._remember(keyspace, key)
        by, note = await self._forwarded(keyspace, key, via and node, result.coordinator)
        return IncrOutcome(
            keyspace, key, result.value, rid, result.coordinator, result.acks, result.needed, result.trace,
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
        (a one-shot client does not ask; `Client` does)."""
        return None


class Client(DataClient, ClusterViews, ClusterOps):
    backend: Backend

    def __init__(self, backend: Backend, consistency: str = "QUORUM", timeout: float = 5.0) -> None:
        super().__init__(backend, consistency, timeout)

    async def _replicas_of(self, keyspace: str, key: str) -> tuple[str, ...] | None:
        try:
            n = await self._replication(keyspace)
        except (BhandarError, ClientError):
            return None  # the write's reply still names its coordinator
        return self.backend.ring.preference_list(key_token(keyspace, key), n)

    async def keyspace_create(
        self,
        name: str,
        policy: str = "siblings",
        n: int | None = None,
        quorum: str = "sloppy",
        ttl: str | int = 0,
    ) -> dict[str, Any]:
        """Create a keyspace; `ttl` in seconds, or as text (`60s`, `5m`, `2h`, `1d`)."""
        default_n = 3
        info = await self._any_info()
        if info.get("keyspaces"):
            default_n = next((k["n"] for k in info["keyspaces"] if k["name"] == "counters"), 3)
        seconds = parse_ttl(ttl) if isinstance(ttl, str) else ttl
        definition = KeyspaceDef(name, policy, default_n if n is None else n, quorum, seconds)
        if definition.n > len(self.backend.names):
            raise BadInput(
                f"n={definition.n} is more than the {len(self.backend.names)} nodes of this cluster"
            )
        via = next((x for x in self.backend.names if self.backend.is_alive(x)), None)
        if via is None:
            raise ClientError("unavailable", "every node is down; revive one first")
        result = await self._call(via, KeyspaceRequest(self.backend.new_rid(), definition))
        assert isinstance(result, KeyspaceResult)
        await self._schema_agreed(via, name)
        d = result.definition
        return {
            "cmd": "keyspace",
            "ok": True,
            "name": d.name,
            "policy": d.policy,
            "n": d.n,
            "quorum": d.quorum,
            "ttl": d.ttl,
            "created": result.created,
        }

    async def _schema_agreed(self, via: str, name: str) -> None:
        """Wait (at most the request timeout) until every live node `via` can reach knows keyspace
        `name`, as Cassandra's drivers wait for schema agreement: a put right after the create
        may go to any of them, and one that has not heard of it yet refuses it."""
        import trio

        group = next((g for g in self.backend.partitions() if via in g), self.backend.names)
        with trio.move_on_after(self.timeout):
            while True:
                waiting = []
                for node in group:
                    if self.backend.is_alive(node):
                        info = await self.backend.node_info(node, counts=False)
                        if name not in {k["name"] for k in info.get("keyspaces", [])}:
                            waiting.append(node)
                if not waiting:
                    return
                await trio.sleep(0.05)

    async def keyspace_list(self) -> dict[str, Any]:
        info = await self._any_info()
        spaces = sorted(info.get("keyspaces", []), key=lambda k: k["name"])
        return {"cmd": "keyspace", "ok": True, "keyspaces": spaces}


def _duplicates(record: Record | None) -> int:
    """How much a counter's P/N table over-counts (retried ids applied by two replicas)."""
    if not isinstance(record, PNCounter):
        return 0
    return sum(p - n for p, n in record.entries().values()) - record.value
