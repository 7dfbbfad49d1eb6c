"""One node process: the core node on trio with its TCP transport, admin RPC and HTTP gateway.

`NodeProcess` owns a node's life in a process: it opens the store in the data directory, listens
on its port (peers and RPC clients), serves the HTTP API, joins the cluster through its seeds
(node/discovery.py) and rebuilds its ring whenever the member set changes. It stops cleanly on an
RPC `shutdown`, SIGTERM or SIGINT (store synced and closed); SIGKILL is the crash.

RPC (one map per frame, answers carry the same `id`): `request` (a client request in wire form:
the node's coordinator answers it), and the admin operations `info`, `records`, `hints`,
`metrics`, `digest`, `partition`, `heal`, `delay`, `join` and `shutdown`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import zlib
from dataclasses import dataclass, fields, replace
from typing import Any

import trio

from bhandar_cli.core.config import NodeConfig
from bhandar_cli.core.messages import (
    ClientRequest,
    DecommissionRequest,
    Failure,
    GetRequest,
    IncrRequest,
    KeyspaceRequest,
    Note,
    PutRequest,
    RepairRequest,
    Result,
)
from bhandar_cli.core.ring import Ring
from bhandar_cli.core.wire import from_wire, to_wire
from bhandar_cli.host.executor import NodeHost
from bhandar_cli.node import admin
from bhandar_cli.node.codec import ProtocolError, encode_frame
from bhandar_cli.node.discovery import Discovery, Member
from bhandar_cli.node.frames import FRAME_TIMEOUT, FrameConn, Outbox, wire_frame
from bhandar_cli.node.runtime import FATAL, NodeRunner
from bhandar_cli.node.storage import open_node_store
from bhandar_cli.node.transport import TcpTransport

log = logging.getLogger("bhandar.node")

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
    "delta": (int,),
    "request_id": (str,),
}


def check_request(req: Any) -> ClientRequest:
    """The request if it is a well-typed client request; raises ValueError saying what is wrong."""
    if not isinstance(
        req, PutRequest | GetRequest | IncrRequest | KeyspaceRequest | RepairRequest | DecommissionRequest
    ):
        raise ValueError(f"expected a client request, got {type(req).__name__}")
    for f in fields(req):
        expected = _FIELD_TYPES.get(f.name)
        value = getattr(req, f.name)
        if expected is not None and (
            not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected)
        ):
            raise ValueError(f"{type(req).__name__}.{f.name} has the wrong type ({type(value).__name__})")
    context = getattr(req, "context", None)
    if context is not None and not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in context.items()
    ):
        raise ValueError("the context must map node names to counters")
    return req


@dataclass(frozen=True)
class NodeOptions:
    id: str
    data_dir: str
    host: str = "127.0.0.1"
    port: int = 0
    http_port: int = 0  # 0: any free port; -1: no HTTP API
    zone: str = "z1"
    seeds: tuple[tuple[str, int], ...] = ()
    vnodes: int = 8
    replicas: int = 3
    fsync: str = "batch"
    frame_timeout: float = FRAME_TIMEOUT


class NodeProcess:
    def __init__(self, options: NodeOptions) -> None:
        self.options = options
        self.id = options.id
        self.config = NodeConfig(default_n=options.replicas)
        self.store = open_node_store(options.data_dir, options.fsync)
        self.incarnation = time.time_ns()
        self.transport = TcpTransport(
            options.id, self._on_peer_message, self._serve_client, options.frame_timeout
        )
        ring = Ring.build([options.id], options.vnodes, {options.id: options.zone})
        seed = zlib.crc32(options.id.encode()) ^ self.incarnation
        self.host = NodeHost(
            options.id,
            options.zone,
            ring,
            self.store,
            self.config,
            seed,
            self.transport.send,
            self._note,
            FATAL,
        )
        self.runner = NodeRunner(self.host, offload=True)
        self.discovery: Discovery | None = None
        self.port = options.port
        self.http_port = options.http_port
        self.shutdown = trio.Event()
        self._next_rid = 0

    async def run(self, task_status: trio.TaskStatus[tuple[int, int]] = trio.TASK_STATUS_IGNORED) -> None:
        opts = self.options
        try:
            async with trio.open_nursery() as nursery:
                if opts.http_port >= 0:
                    from bhandar_cli.node.http import serve_http

                    self.http_port = await nursery.start(serve_http, self, opts.host, opts.http_port)
                self.port = await nursery.start(self.transport.serve, opts.host, opts.port)
                # No checkpoint between listening and this: a join arriving finds discovery ready.
                me = Member(opts.id, opts.host, self.port, self.http_port, opts.zone, self.incarnation)
                self.discovery = Discovery(me, opts.seeds, self.transport.send, self._members_changed)
                await nursery.start(self._life)
                nursery.start_soon(self.discovery.run)
                nursery.start_soon(self._watch_signals)
                log.info("node %s serving on %s:%d (http %d)", opts.id, opts.host, self.port, self.http_port)
                task_status.started((self.port, self.http_port))
                await self.shutdown.wait()
                nursery.cancel_scope.cancel()
        finally:
            self.store.sync()
            close = getattr(self.store, "close", None)
            if close is not None:
                close()
            log.info("node %s stopped", opts.id)

    async def _life(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The node's one life in this process. If it crashes the process stops (exit status 1), so
        `cluster status` shows the node down and `cluster start` restarts it."""
        await self.runner.run(task_status=task_status)
        if self.host.crash_reason is not None:
            log.error("node %s %s; stopping the process", self.id, self.host.crash_reason)
            self.shutdown.set()

    async def _watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal %d: stopping", signum)
                self.shutdown.set()

    # --- membership --------------------------------------------------------------------------

    def _members_changed(self, members: dict[str, Member]) -> None:
        for member in members.values():
            if member.id != self.id:
                self.transport.set_address(member.id, member.host, member.port)
        ring = Ring.build(sorted(members), self.options.vnodes, {m.id: m.zone for m in members.values()})
        self.host.ring = ring
        node = self.host.node
        if node is not None:
            node.learn_ring(trio.current_time(), ring)

    def _on_peer_message(self, src: str, msg: Any) -> None:
        if self.discovery is not None and self.discovery.handle(src, msg):
            return
        self.host.deliver(src, msg)

    def _note(self, name: str, note: Note) -> None:
        log.info("%s: %s", name, note.text)

    # --- the coordinator, for the RPC and HTTP faces ---------------------------------------------

    def submit(self, request: ClientRequest, respond: Any) -> None:
        """Hand a client request to this node's coordinator under a rid unique in this node."""
        self._next_rid += 1
        self.host.submit(replace(request, rid=self._next_rid), respond)

    async def call(self, request: ClientRequest, timeout: float = 10.0) -> Result:
        box: list[Result] = []
        done = trio.Event()

        def respond(result: Result) -> None:
            box.append(result)
            done.set()

        self.submit(request, respond)
        with trio.move_on_after(timeout):
            await done.wait()
        return box[0] if box else Failure("timeout", f"node {self.id} did not answer within {timeout:g} s")

    # --- RPC -----------------------------------------------------------------------------------

    async def _serve_client(self, conn: FrameConn) -> None:
        out = Outbox(conn.stream)
        error: ProtocolError | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write_until_broken, out, nursery.cancel_scope)
            try:
                while (body := await conn.receive()) is not None:
                    if not isinstance(body, dict) or not isinstance(body.get("op"), str):
                        raise ProtocolError("an RPC frame must be a map with an 'op'")
                    self._dispatch(body, out)
            except ProtocolError as exc:
                error = exc  # re-raised outside the nursery so it is not wrapped in a group
            nursery.cancel_scope.cancel()
        if error is not None:
            raise error

    def _dispatch(self, body: dict[str, Any], out: Outbox) -> None:
        call_id, op = body.get("id"), body["op"]
        if op == "request":
            try:
                request = check_request(from_wire(body.get("msg")))
            except Exception as exc:  # whatever from_wire or the dataclasses object to
                _answer(out, call_id, error=f"bad request: {exc}")
                return

            def respond(result: Result) -> None:
                try:
                    out.put(wire_frame({"id": call_id, "ok": True, "body": to_wire(result)}))
                except ValueError as exc:  # never raise into the node that calls us
                    _answer(out, call_id, error=f"internal error: cannot encode the result: {exc}")

            self.submit(request, respond)
            return
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            _answer(out, call_id, error=f"unknown operation {op!r}")
            return
        try:
            _answer(out, call_id, handler(body))
        except (ValueError, TypeError, KeyError) as exc:
            _answer(out, call_id, error=f"bad {op} arguments: {exc}")

    def current_metrics(self) -> Any:
        node = self.host.node
        return None if node is None else node.metrics

    def info(self, counts: bool = True) -> dict[str, Any]:
        ring, now = self.host.ring, trio.current_time()
        tokens = len(ring.tokens_by_node().get(self.id, []))
        info = admin.node_info(self.id, self.options.zone, self.host.node, now, tokens, counts)
        info.update(
            members=sorted(self.discovery.members) if self.discovery else [self.id],
            pid=os.getpid(),
            host=self.options.host,
            port=self.port,
            http_port=self.http_port,
            incarnation=self.incarnation,
            partitions=self.transport.model.groups,
            delays={k: v * 1000.0 for k, v in self.transport.model.extra_delay.items()},
            transport=dict(self.transport.stats),
            connected=self.transport.connected(),
        )
        return info

    def _op_info(self, body: dict[str, Any]) -> Any:
        return self.info(counts=bool(body.get("counts", True)))

    def _op_records(self, body: dict[str, Any]) -> Any:
        node = self.host.node
        if node is None:
            return None
        return admin.records_to_plain(node.records(str(body["keyspace"]), str(body["key"])))

    def _op_hints(self, body: dict[str, Any]) -> Any:
        node = self.host.node
        return [] if node is None else node.hints_summary(trio.current_time())

    def _op_metrics(self, body: dict[str, Any]) -> Any:
        node = self.host.node
        if node is None:
            return None
        plain = admin.metrics_to_plain(node.metrics)
        # CBOR map keys must be text here; metrics_from_plain reads the bucket numbers back.
        plain["ops"] = [[*row[:4], {str(b): c for b, c in row[4].items()}, *row[5:]] for row in plain["ops"]]
        return plain

    def _op_digest(self, body: dict[str, Any]) -> Any:
        node = self.host.node
        return [] if node is None else node.digests()

    def _op_partition(self, body: dict[str, Any]) -> Any:
        groups = [[str(n) for n in g] for g in body["groups"]]
        everyone = [str(n) for n in body.get("nodes", ())]
        model = self.transport.model
        model.partition(groups, [*everyone, self.id])
        return sorted(peer for (me, peer) in model.blocked if me == self.id)

    def _op_heal(self, body: dict[str, Any]) -> Any:
        self.transport.model.heal()
        return True

    def _op_delay(self, body: dict[str, Any]) -> Any:
        delays = {str(n): float(ms) / 1000.0 for n, ms in body["delays"].items() if float(ms) > 0}
        self.transport.model.extra_delay = delays
        return True

    def _op_join(self, body: dict[str, Any]) -> Any:
        if self.discovery is None:
            raise ValueError("this node is still starting")
        return self.discovery.join_request(body["member"])

    def _op_members(self, body: dict[str, Any]) -> Any:
        node = self.host.node
        return [] if node is None else node.members(trio.current_time())

    def _op_tree(self, body: dict[str, Any]) -> Any:
        node = self.host.node
        if node is None:
            return []
        return node.tree_entries(str(body["keyspace"]), int(body["lo"]), int(body["hi"]))

    def _op_flush(self, body: dict[str, Any]) -> Any:
        return self.store.flush()

    def _op_compact(self, body: dict[str, Any]) -> Any:
        return self.store.compact()

    def _op_snapshot(self, body: dict[str, Any]) -> Any:
        return len(self.store.snapshot(str(body["dir"])))

    def _op_shutdown(self, body: dict[str, Any]) -> Any:
        # Answer first, stop just after: the caller learns the stop was accepted.
        trio.lowlevel.spawn_system_task(_set_soon, self.shutdown)
        return True


async def _set_soon(event: trio.Event) -> None:
    await trio.sleep(0.05)
    event.set()


async def _write_until_broken(out: Outbox, scope: trio.CancelScope) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError):
        await out.run()
    scope.cancel()


def _answer(out: Outbox, call_id: Any, body: Any = None, error: str | None = None) -> None:
    reply = {
        "id": call_id,
        "ok": error is None,
        "body" if error is None else "error": body if error is None else error,
    }
    try:
        frame = encode_frame(reply)
    except ValueError as exc:
        log.error("cannot encode the answer to call %r: %s", call_id, exc)
        frame = encode_frame({"id": call_id, "ok": False, "error": f"internal error: {exc}"})
    out.put(frame)  # a client that stops reading loses its answers, not the node's time


class EpochClock(trio.abc.Clock):
    """Trio time as seconds since the Unix epoch, read from the monotonic clock.

    Trio's default clock starts at a random offset in every process. Node time ends up in data
    (sibling timestamps decide last-write-wins, hints record when they were made), so every
    process of a cluster, and a node restarted later, must share one time line.
    """

    def __init__(self) -> None:
        self._offset = time.time() - time.monotonic()

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return time.monotonic() + self._offset

    def deadline_to_sleep_time(self, deadline: float) -> float:
        return deadline - self.current_time()


def run_node(options: NodeOptions) -> None:
    """The body of `bhandar node run` (blocks until the node stops)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.makedirs(options.data_dir, exist_ok=True)
    process = NodeProcess(options)
    try:
        trio.run(process.run, clock=EpochClock())
    except BaseExceptionGroup as group:
        # A port already taken surfaces from inside the nurseries; say it plainly.
        errors = group.subgroup(OSError)
        while isinstance(errors, BaseExceptionGroup):
            errors = errors.exceptions[0]
        if isinstance(errors, OSError):
            raise errors from None
        raise
    if process.host.crash_reason is not None:
        raise NodeCrashed(f"node {options.id} {process.host.crash_reason}")


class NodeCrashed(Exception):
    """The node's life ended on an internal error or a failed disk (logged with the node's id)."""
