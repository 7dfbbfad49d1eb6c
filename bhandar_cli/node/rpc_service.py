"""The RPC a node process serves on its port: client requests, and the admin operations.

One map per frame, answers carry the same `id`: `request` (a client request in wire form: the node's
coordinator answers it), each view and admin call of `NODE_CALLS` (info, metrics, partition,
token_create, ...: core/protocol/node_operations.py, which says the role each needs and the
type of its arguments) by the handler registered under its name here, called with the arguments
read from the frame into that type (a missing or mistyped one is refused in one line), and the
node operations of the same module (`flush`, `compact`). When the node checks tokens
(security/auth.py), each call is checked against the token the connection's hello showed, at the
time of the call (a revocation counts at once); a refusal answers with its `code` (unauthenticated,
forbidden, rate_limited). Fast operations are answered at once; slow ones (`compact`) run in a task
of the connection and are answered when done, so the node's event loop never waits for them. A
request from the network is checked field by field before the core sees it (the core trusts its
inputs). A connection with no call for `CLIENT_IDLE` seconds is told so (`{"notice": "idle"}`)
and closed a little later; a client opens a new one for its next call (node/net/rpc.py).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import trio

from bhandar_cli.core import NodeInfo, from_wire, to_wire, to_wire_at
from bhandar_cli.core.model import BhandarError, RateLimited, TokenTable, Unavailable, check_record
from bhandar_cli.core.protocol import (
    NODE_CALLS,
    NODE_OPERATIONS,
    ClientRequest,
    ConfigArgs,
    DecommissionRequest,
    DelayArgs,
    Failure,
    GetRequest,
    IncrRequest,
    InfoArgs,
    JoinTokenArgs,
    KeyspaceRequest,
    MembersArgs,
    NoArgs,
    NotesArgs,
    PartitionArgs,
    PutRequest,
    RangeHashesArgs,
    RecordsArgs,
    RemoveArgs,
    RepairRequest,
    Result,
    SnapshotArgs,
    TokenCreateArgs,
    TokenRevokeArgs,
    TreeArgs,
    field_names,
    parse_args,
)
from bhandar_cli.host import NodeHost
from bhandar_cli.node import admin
from bhandar_cli.node.join import JoinDesk
from bhandar_cli.node.net import (
    FrameConn,
    Outbox,
    ProtocolError,
    TcpTransport,
    Truncated,
    encode_frame,
    negotiate,
    protocol,
    wire_frame,
)
from bhandar_cli.node.note_log import NoteLog
from bhandar_cli.node.reconfigure import apply_live, config_view
from bhandar_cli.security import DEFAULT_TTL, Authenticator, Credential, JoinRefused, request_op
from bhandar_cli.store import RecordStore, snapshot_path


class ServedProcess(Protocol):
    """What the RPC service answers from: the node process it serves (node/process.py's
    `NodeProcess`), as far as the operations read or change it."""

    id: str
    host: NodeHost
    store: RecordStore
    transport: TcpTransport
    auth: Authenticator | None
    join_desk: JoinDesk
    notes: NoteLog
    snapshot_root: Path
    draining: bool

    def refusal(self) -> str: ...
    def token_table(self) -> TokenTable: ...
    def info(self, counts: bool = True) -> NodeInfo: ...
    def submit(self, request: ClientRequest, respond: Callable[[Result], None]) -> int: ...
    async def stop(self) -> None: ...


log = logging.getLogger("bhandar.node")

COMPACT_WAIT = 60.0  # seconds a `compact` waits for a compaction already in flight
# A client connection with no call for CLIENT_IDLE seconds (and none in flight) is told so and
# closed IDLE_GRACE seconds later: a forgotten connection gives its place (admission.py) back.
CLIENT_IDLE = 120.0
IDLE_GRACE = 5.0

# What the fields of a client request must hold; the core trusts its inputs' types, the network
# must not be trusted, so a request is checked here before it reaches the coordinator.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "rid": (int,),
    "keyspace": (str, type(None)),  # None only in RepairRequest (every keyspace)
    "key": (str,),
    "value": (bytes, type(None)),
    "ctype": (str,),
    "context": (dict, type(None)),
    "consistency": (str,),
    "trace": (bool,),
    "hops": (int,),
    "avoid": (tuple,),
    "delta": (int,),
    "request_id": (str,),
}


# Per client request type, its fields that have an expected type, with that type: read once.
_CHECKS: dict[type, tuple[tuple[str, tuple[type, ...]], ...]] = {
    cls: tuple((name, _FIELD_TYPES[name]) for name in field_names(cls) if name in _FIELD_TYPES)
    for cls in (PutRequest, GetRequest, IncrRequest, KeyspaceRequest, RepairRequest, DecommissionRequest)
}


def check_request(req: Any) -> ClientRequest:
    """The request if it is a well-typed client request; raises ValueError saying what is wrong."""
    checks = _CHECKS.get(type(req))
    if checks is None:
        raise ValueError(f"expected a client request, got {type(req).__name__}")
    for name, expected in checks:
        value = getattr(req, name)
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            raise ValueError(f"{type(req).__name__}.{name} has the wrong type ({type(value).__name__})")
    context = getattr(req, "context", None)
    if context is not None and not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in context.items()
    ):
        raise ValueError("the context must map node names to counters")
    return cast(ClientRequest, req)  # its type is one of _CHECKS's keys


Args = TypeVar("Args")
Handler = Callable[["RpcService", Any], Any]  # called with its call's arguments (NodeCall.args)
SlowHandler = Callable[["RpcService", dict[str, Any]], Awaitable[Any]]
# Each call of NODE_CALLS (core/protocol/node_operations.py) by name: its handler, registered by
# `_serves` below (a store operation of NODE_OPERATIONS that must run off the event loop: by
# `_serves_slowly`).
_HANDLERS: dict[str, Handler] = {}
_SLOW_HANDLERS: dict[str, SlowHandler] = {}


def _serves(
    name: str, args: type[Args]
) -> Callable[[Callable[[RpcService, Args], Any]], Callable[[RpcService, Args], Any]]:
    """Register the handler of the node call `name`, which takes `args` (mypy checks the handler's
    parameter against it); a name the table lacks, or other arguments than its entry's, fail at
    import."""
    if name not in NODE_CALLS or name in _HANDLERS:
        raise LookupError(f"no node call {name!r} in NODE_CALLS, or served twice")
    if args is not NODE_CALLS[name].args:
        raise TypeError(f"node call {name!r} takes {NODE_CALLS[name].args.__name__}, not {args.__name__}")

    def register(handler: Callable[[RpcService, Args], Any]) -> Callable[[RpcService, Args], Any]:
        _HANDLERS[name] = handler
        return handler

    return register


def _serves_slowly(name: str) -> Callable[[SlowHandler], SlowHandler]:
    """Register how the store operation `name` runs off the event loop."""
    if name not in NODE_OPERATIONS:
        raise LookupError(f"no node operation {name!r} in NODE_OPERATIONS")

    def register(handler: SlowHandler) -> SlowHandler:
        _SLOW_HANDLERS[name] = handler
        return handler

    return register


class RpcService:
    """Serves one node process's RPC connections (its collaborator: the process)."""

    def __init__(self, process: ServedProcess, idle_after: float = CLIENT_IDLE) -> None:
        self.process = process
        self.idle_after = idle_after
        self._outboxes: set[Outbox] = set()  # of the open client connections

    def announce_draining(self) -> None:
        """Tell every connected client this node is stopping (an unsolicited frame with no call
        id, which a client that does not know it ignores): it sends its next requests elsewhere."""
        for out in list(self._outboxes):
            out.put(wire_frame({"id": None, "notice": "draining"}, out.version))

    async def serve(self, conn: FrameConn, hello: dict[str, Any], admit: Callable[[], None]) -> None:
        """One client connection, opened by `hello`: RPC frames in, answers out (in any order:
        each names its call). `admit` lifts the connection's limits before authentication
        (node/net/admission.py), once a call shows its token is one this node knows (it may have learnt
        it by gossip after the hello)."""
        out = Outbox(conn.stream)
        # Answers in the newest version both sides read: a client's hello names what it reads.
        out.version = negotiate(protocol(), hello.get("protocol"))
        credential = Credential.of(hello.get("token"))
        self._outboxes.add(out)
        try:
            await self._serve(conn, out, credential, admit)
        finally:
            self._outboxes.discard(out)

    async def _serve(
        self, conn: FrameConn, out: Outbox, credential: Credential, admit: Callable[[], None]
    ) -> None:
        error: ProtocolError | Truncated | None = None
        calls = _Calls()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write_until_broken, out, nursery.cancel_scope)
            try:
                while (body := await self._next_call(conn, out, calls)) is not None:
                    if not isinstance(body, dict) or not isinstance(body.get("op"), str):
                        raise ProtocolError("an RPC frame must be a map with an 'op'")
                    args = {str(k): v for k, v in body.items()}
                    self._dispatch(args, out, nursery, credential, admit, calls)
            except (ProtocolError, Truncated) as exc:
                error = exc  # re-raised outside the nursery so it is not wrapped in a group
            nursery.cancel_scope.cancel()
        if error is not None:
            raise error

    async def _next_call(self, conn: FrameConn, out: Outbox, calls: _Calls) -> Any:
        """The connection's next frame; None at its end, or once it has been idle (no call
        coming, none in flight) for `idle_after` seconds and then IDLE_GRACE more after the
        "idle" notice. The notice tells a client to send its next calls on a new connection
        (node/net/rpc.py reopens one), and the grace answers the calls that crossed it: so an
        idle connection gives its place back and no call on it is lost."""
        noticed = False
        while True:
            with trio.move_on_after(IDLE_GRACE if noticed else self.idle_after):
                return await conn.receive()
            if calls.in_flight or conn.decoder.buffered:
                continue  # waiting for our answers, or in the middle of a frame: not idle
            if noticed:
                return None
            out.put(wire_frame({"id": None, "notice": "idle"}, out.version))
            noticed = True

    def _refusal(self, credential: Credential, op: str, keyspace: str | None) -> BhandarError | None:
        """Why this connection's token may not do `op` now (None: it may, or tokens are off)."""
        if self.process.auth is None:
            return None
        try:
            self.process.auth.check(credential, op, keyspace, trio.current_time())
        except BhandarError as exc:
            return exc
        return None

    def _dispatch(
        self,
        body: dict[str, Any],
        out: Outbox,
        nursery: trio.Nursery,
        credential: Credential,
        admit: Callable[[], None],
        calls: _Calls,
    ) -> None:
        call_id, op = body.get("id"), body["op"]
        if op == "request":
            refusal = self.process.refusal()
            if refusal:  # not run (stopping, or just started): the client sends it to another node
                _answer(out, call_id, error=refusal, draining=True)
                return
            try:
                request = check_request(from_wire(body.get("msg")))
            except Exception as exc:  # whatever from_wire or the dataclasses object to
                _answer(out, call_id, error=f"bad request: {exc}")
                return
            refused = self._refusal(credential, *request_op(request)) or _admitted(admit)
            if refused is not None:  # a failed request, as the client reads any other
                failure = Failure(refused.code, str(refused))
                out.put_message({"id": call_id, "ok": True, "body": to_wire(failure)})
                return
            calls.started()
            answered = False

            def respond(result: Result) -> None:
                nonlocal answered
                if not answered:  # the core answers once; counted once whatever happens
                    answered = True
                    calls.ended()
                try:
                    # Answers ready at one moment leave in one frame (protocol 3: frames.py).
                    # In the client's version: an older client reads no field newer than it.
                    body = to_wire_at(result, out.version)
                    out.put_message({"id": call_id, "ok": True, "body": body})
                except ValueError as exc:  # never raise into the node that calls us
                    _answer(out, call_id, error=f"internal error: cannot encode the result: {exc}")

            self.process.submit(request, respond)
            return
        refused = self._refusal(credential, op, None) or _admitted(admit)
        if refused is not None:
            _refuse(out, call_id, refused)
            return
        slow = _SLOW_HANDLERS.get(op)
        if slow is not None:  # work off the event loop: answered when it is done
            calls.started()
            nursery.start_soon(self._answer_later, functools.partial(slow, self), body, out, call_id, calls)
            return
        handler = self._node_call(op) or self._node_operation(op)
        if handler is None:
            _answer(out, call_id, error=f"unknown operation {op!r}")
            return
        try:
            _answer(out, call_id, handler(body))
        except (ValueError, TypeError, KeyError) as exc:
            _answer(out, call_id, error=f"bad {op} arguments: {exc}")
        except BhandarError as exc:
            _refuse(out, call_id, exc)

    def _node_call(self, op: str) -> Callable[[dict[str, Any]], Any] | None:
        """A call of NODE_CALLS: its handler, given the arguments read from the frame into the
        type its entry names (BadArguments if they are not there)."""
        served, call = _HANDLERS.get(op), NODE_CALLS.get(op)
        if served is None or call is None:
            return None
        return lambda body: served(self, parse_args(call.args, body, op))

    def _node_operation(self, op: str) -> Callable[[dict[str, Any]], Any] | None:
        """An operation of the node-operation table, run on this node's store at once (compact
        has its own slow path above: it is built in a worker thread)."""
        operation = NODE_OPERATIONS.get(op)
        if operation is None:
            return None
        return lambda body: operation.run(self.process.store)

    @_serves("info", InfoArgs)
    def _op_info(self, args: InfoArgs) -> Any:
        return self.process.info(counts=args.counts)

    @_serves("notes", NotesArgs)
    def _op_notes(self, args: NotesArgs) -> Any:
        return self.process.notes.since(args.since, args.boot)

    @_serves("records", RecordsArgs)
    def _op_records(self, args: RecordsArgs) -> Any:
        node = self.process.host.node
        if node is None:
            return None
        return admin.records_to_plain(node.records(args.keyspace, args.key))

    @_serves("hints", NoArgs)
    def _op_hints(self, args: NoArgs) -> Any:
        node = self.process.host.node
        return [] if node is None else node.hints_summary(trio.current_time())

    @_serves("metrics", NoArgs)
    def _op_metrics(self, args: NoArgs) -> Any:
        node = self.process.host.node
        if node is None:
            return None
        plain = admin.metrics_to_plain(node.metrics)
        # CBOR map keys must be text here; metrics_from_plain reads the bucket numbers back.
        plain["ops"] = [[*row[:4], {str(b): c for b, c in row[4].items()}, *row[5:]] for row in plain["ops"]]
        return plain

    @_serves("digest", NoArgs)
    def _op_digest(self, args: NoArgs) -> Any:
        node = self.process.host.node
        return [] if node is None else node.digests()

    @_serves("range_hashes", RangeHashesArgs)
    def _op_range_hashes(self, args: RangeHashesArgs) -> Any:
        node = self.process.host.node
        return [] if node is None else node.range_hashes([(lo, hi) for lo, hi in args.ranges])

    @_serves("partition", PartitionArgs)
    def _op_partition(self, args: PartitionArgs) -> Any:
        model = self.process.transport.model
        model.partition(args.groups, [*args.nodes, self.process.id])
        return sorted(peer for (me, peer) in model.blocked if me == self.process.id)

    @_serves("heal", NoArgs)
    def _op_heal(self, args: NoArgs) -> Any:
        self.process.transport.model.heal()
        return True

    @_serves("delay", DelayArgs)
    def _op_delay(self, args: DelayArgs) -> Any:
        delays = {n: ms / 1000.0 for n, ms in args.delays.items() if ms > 0}
        self.process.transport.model.extra_delay = delays
        return True

    @_serves("members", MembersArgs)
    def _op_members(self, args: MembersArgs) -> Any:
        node = self.process.host.node
        if node is None:
            return []
        rows = node.members(trio.current_time(), placement=args.placement)
        heard = self.process.transport.peer_protocols
        for row in rows:  # the protocol each member speaks: its own, or what its hello said
            mid = row["id"]
            row["protocol"] = protocol() if mid == self.process.id else heard.get(mid, (None,))[0]
        return rows

    @_serves("tree", TreeArgs)
    def _op_tree(self, args: TreeArgs) -> Any:
        node = self.process.host.node
        if node is None:
            return []
        return node.tree_entries(args.keyspace, args.lo, args.hi)

    @_serves("snapshot", SnapshotArgs)
    def _op_snapshot(self, args: SnapshotArgs) -> Any:
        to = args.to  # a snapshot copied off to another directory (to=DIR)
        root = (Path(to) if to else self.process.snapshot_root).resolve()  # kept in the store's ARCHIVES
        path = snapshot_path(root, args.snapshot, self.process.id)
        return len(self.process.store.snapshot(str(path), copy=bool(to)))

    @_serves("remove", RemoveArgs)
    def _op_remove(self, args: RemoveArgs) -> Any:
        """Take a member out of the cluster for good (`cluster remove`): sealed here, so only an
        issuing node does it (Refused elsewhere); gossip spreads it."""
        node = self.process.host.node
        if node is None:
            raise Unavailable(f"{self.process.id} is starting: ask again in a moment")
        node.remove_member(args.node, trio.current_time())
        return {"node": args.node, "by": self.process.id}

    @_serves("token_create", TokenCreateArgs)
    def _op_token_create(self, args: TokenCreateArgs) -> Any:
        record = check_record(from_wire(args.record))
        self.process.token_table().add(record)
        return record.id

    @_serves("token_list", NoArgs)
    def _op_token_list(self, args: NoArgs) -> Any:
        records = self.process.token_table().records()
        return [{k: v for k, v in r.to_plain().items() if k != "digest"} for r in records]  # never a hash

    @_serves("token_revoke", TokenRevokeArgs)
    def _op_token_revoke(self, args: TokenRevokeArgs) -> Any:
        return self.process.token_table().revoke(args.token_id).id

    @_serves("join_token", JoinTokenArgs)
    def _op_join_token(self, args: JoinTokenArgs) -> Any:
        """Mint a join token (node/join.py): {"token", "expires"}, or {"refused": why}."""
        try:
            token = self.process.join_desk.mint(DEFAULT_TTL if args.ttl is None else args.ttl)
        except JoinRefused as exc:
            return {"refused": str(exc)}
        return {"token": str(token), "expires": token.expires}

    @_serves("config", ConfigArgs)
    def _op_config(self, args: ConfigArgs) -> Any:
        """With `config`: apply that version of the cluster configuration now. The node's
        configuration (version and values) either way."""
        if args.config is not None:
            return apply_live(self.process.host, args.config)
        return config_view(self.process.host)

    @_serves("shutdown", NoArgs)
    def _op_shutdown(self, args: NoArgs) -> Any:
        # Answer first, drain and stop just after: the caller learns the stop was accepted.
        trio.lowlevel.spawn_system_task(_stop_soon, self.process)
        return True

    async def _answer_later(
        self,
        slow: Callable[[dict[str, Any]], Awaitable[Any]],
        body: dict[str, Any],
        out: Outbox,
        call_id: Any,
        calls: _Calls,
    ) -> None:
        try:
            _answer(out, call_id, await slow(body))
        except (ValueError, TypeError, KeyError) as exc:
            _answer(out, call_id, error=f"bad {body['op']} arguments: {exc}")
        except trio.TooSlowError:
            _answer(out, call_id, error=f"{body['op']}: busy for more than {COMPACT_WAIT:g} s; retry")
        finally:
            calls.ended()

    @_serves_slowly("compact")
    async def _slow_compact(self, body: dict[str, Any]) -> Any:
        """A full compaction, built in a worker thread while the node goes on; the event loop only
        installs the result (milliseconds). Waits (bounded) for a compaction already running."""
        store = self.process.store
        with trio.fail_after(COMPACT_WAIT):
            while (job := store.full_compaction_job()) is None:
                if store.stats().sstables <= 1:
                    return 0  # nothing to merge
                await trio.sleep(0.05)  # the background compaction in flight finishes first
        with trio.CancelScope(shield=True):  # the job's slot must be given back (finish)
            await trio.to_thread.run_sync(job.run)
            report = job.finish()
        return 1 if report.installed else 0


class _Calls:
    """The calls of one connection being worked on (answered later): while any is, it is not idle."""

    def __init__(self) -> None:
        self.in_flight = 0

    def started(self) -> None:
        self.in_flight += 1

    def ended(self) -> None:
        self.in_flight -= 1


def _admitted(admit: Callable[[], None]) -> BhandarError | None:
    """Admit the connection (node/net/admission.py); why not, when a cap stops it."""
    try:
        admit()
    except BhandarError as exc:  # RateLimited (the token's), Unavailable (this node is full)
        return exc
    return None


async def _stop_soon(process: ServedProcess) -> None:
    await trio.sleep(0.05)
    await process.stop()


async def _write_until_broken(out: Outbox, scope: trio.CancelScope) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError):
        await out.run()
    scope.cancel()


def _refuse(out: Outbox, call_id: Any, refused: BhandarError) -> None:
    """An error answer that says whose fault it is (`code`), and when to retry if rate limited."""
    extra: dict[str, Any] = {"code": refused.code}
    if isinstance(refused, RateLimited):
        extra["retry_after"] = refused.retry_after
    _answer(out, call_id, error=str(refused), **extra)


def _answer(out: Outbox, call_id: Any, body: Any = None, error: str | None = None, **extra: Any) -> None:
    reply = {
        "id": call_id,
        "ok": error is None,
        "body" if error is None else "error": body if error is None else error,
        **extra,
    }
    try:
        frame = encode_frame(reply, version=out.version)
    except ValueError as exc:
        log.error("cannot encode the answer to call %r: %s", call_id, exc)
        failed = {"id": call_id, "ok": False, "error": f"internal error: {exc}"}
        frame = encode_frame(failed, version=out.version)
    out.put(frame)  # a client that stops reading loses its answers, not the node's time
