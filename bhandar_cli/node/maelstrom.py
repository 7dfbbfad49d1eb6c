"""`bhandar node maelstrom`: Bhandar's own node as a Maelstrom node, over standard input/output.

The third environment of the effect executor (after the trio runtime's node processes and the
simulator): the same core node in a `NodeHost`, run by the same `NodeRunner` on trio, whose
network is this process's standard output and input. Nothing here decides anything about data:
it frames and unframes.

- `init` {node_id, node_ids} builds the ring of every node named and boots the node; its store
  is on disk in `--data-dir`, else in $BHANDAR_CHECK_DIR (the directory `bhandar check` gives
  each node slot, so a node killed and restarted there comes back with its data), else in
  memory. A node must not speak before `init`: until then it does not know its own id, and an
  answer would claim to come from "". Messages that come first (a client's request or a peer's
  frame that overtook the `init` of a restarted node) are held, in order, and handled once `init`
  has been answered, so a request is served late rather than lost; at most `EARLY_LIMIT` are
  held (beyond that one is dropped and logged, and its client sees a timeout: indefinite).
- A message between nodes is a body `{"type": "bhandar", "frame": BASE64}`: the core message
  as the wire encoding the TCP transport uses (core/wire.py, CBOR checked before decoding); a
  frame that does not decode is logged and dropped, as the transport does.
- Workload requests become client requests (node/maelstrom_api.py) submitted to the host; the
  answer goes out when the executor answers them (a write only once it is durable).

Standard output carries messages only; logs go to standard error. End of input, SIGTERM or
SIGINT stop the node and close its store.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import signal
import sys
from collections import deque
from typing import Any

import cbor2
import trio

from bhandar_cli.core import from_wire, to_wire
from bhandar_cli.core.membership import Ring
from bhandar_cli.core.model import MemoryStore, NodeConfig, Store
from bhandar_cli.core.protocol import ClientRequest, Result
from bhandar_cli.host import NodeHost, zone_map
from bhandar_cli.node.epoch_clock import EpochClock
from bhandar_cli.node.maelstrom_api import NotServed, answer_of, request_of, schema_request
from bhandar_cli.node.net import DEFAULT_MAX_DEPTH, DEFAULT_MAX_ITEMS, validate_cbor
from bhandar_cli.node.runtime import FATAL, NodeRunner

log = logging.getLogger("bhandar.node")

PEER = "bhandar"  # the body type of a message between two Bhandar nodes
ZONES = 3
EARLY_LIMIT = 10_000  # messages held until `init` (as many as a node's inbox holds)


class MaelstromNode:
    def __init__(self, data_dir: str = "", vnodes: int = 8, level: str = "QUORUM") -> None:
        self.data_dir = data_dir or os.environ.get("BHANDAR_CHECK_DIR", "")
        self.vnodes = vnodes
        self.level = level
        self.id = ""
        self.host: NodeHost | None = None
        self.store: Store | None = None
        self._out: deque[bytes] = deque()
        self._ready = trio.Event()
        self._msg_id = 0
        self._nursery: trio.Nursery | None = None
        self._early: deque[tuple[str, dict[str, Any]]] = deque()  # what came before `init`

    async def run(self) -> None:
        stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        stdout = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._write, stdout)
                nursery.start_soon(self._signals, nursery.cancel_scope)
                await self._read(stdin)
                nursery.cancel_scope.cancel()
        finally:
            if self.store is not None:
                self.store.close()

    async def _signals(self, scope: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                scope.cancel()
                return

    # --- standard input and output -------------------------------------------------------------

    async def _read(self, stdin: trio.lowlevel.FdStream) -> None:
        pending = b""
        while chunk := await stdin.receive_some(1 << 16):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    await self._line(line)

    async def _write(self, stdout: trio.lowlevel.FdStream) -> None:
        while True:
            if not self._out:
                self._ready = trio.Event()
                await self._ready.wait()
                continue
            data = b"".join(self._out)
            self._out.clear()
            await stdout.send_all(data)

    def _emit(self, dest: str, body: dict[str, Any]) -> None:
        line = json.dumps({"src": self.id, "dest": dest, "body": body}, separators=(",", ":"))
        self._out.append(line.encode() + b"\n")
        self._ready.set()

    def _answer(self, src: str, request: dict[str, Any], body: dict[str, Any]) -> None:
        if "msg_id" in request:
            self._msg_id += 1
            self._emit(src, {**body, "in_reply_to": request["msg_id"], "msg_id": self._msg_id})

    # --- messages --------------------------------------------------------------------------------

    async def _line(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
            src, body = str(msg["src"]), msg["body"]
            kind = body["type"]
        except (ValueError, KeyError, TypeError):
            log.error("node %s: dropped a line that is not a message: %r", self.id or "?", line[:200])
            return
        if kind == "init":
            await self._init(src, body)
        elif self.host is None:
            self._hold(src, body)
        else:
            self._handle(src, body)

    def _handle(self, src: str, body: dict[str, Any]) -> None:
        if body["type"] == PEER:
            self._peer(src, body)
        else:
            self._client(src, body)

    def _hold(self, src: str, body: dict[str, Any]) -> None:
        """A message before `init`: kept for after it (no answer can name this node yet)."""
        if len(self._early) >= EARLY_LIMIT:
            log.error("node ?: dropped a %r message from %s that came before init", body["type"], src)
            return
        self._early.append((src, body))

    async def _init(self, src: str, body: dict[str, Any]) -> None:
        if self.host is None:
            self.id = str(body["node_id"])
            names = [str(n) for n in body["node_ids"]]
            await self._boot(names)
        self._answer(src, body, {"type": "init_ok"})
        while self._early:
            self._handle(*self._early.popleft())

    async def _boot(self, names: list[str]) -> None:
        zones = zone_map(names, ZONES)
        ring = Ring.build(names, self.vnodes, zones)
        config = NodeConfig(default_n=min(3, len(names)))
        if self.data_dir:
            from bhandar_cli.store import open_node_store

            self.store = open_node_store(self.data_dir)
        else:
            self.store = MemoryStore()
        seed = random.SystemRandom().getrandbits(64)
        host = NodeHost(
            name=self.id,
            zone=zones[self.id],
            ring=ring,
            store=self.store,
            config=config,
            seed=seed,
            send=self._send,
            fatal=FATAL,
            clock=trio.current_time,
        )
        self.host = host
        assert self._nursery is not None
        await self._nursery.start(self._life, NodeRunner(host, offload=bool(self.data_dir)))
        host.submit(schema_request(0, config.default_n), lambda result: None)

    async def _life(
        self, runner: NodeRunner, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await runner.run(task_status=task_status)
        if runner.host.crash_reason is not None:
            log.error("node %s %s; stopping", self.id, runner.host.crash_reason)
            assert self._nursery is not None
            self._nursery.cancel_scope.cancel()

    def _send(self, src: str, dst: str, msg: Any) -> None:
        """The executor's network: a core message to another node, as a frame in a body."""
        frame = base64.b64encode(cbor2.dumps(to_wire(msg))).decode("ascii")
        self._emit(dst, {"type": PEER, "frame": frame})

    def _peer(self, src: str, body: dict[str, Any]) -> None:
        assert self.host is not None
        try:
            raw = base64.b64decode(body["frame"], validate=True)
            validate_cbor(raw, max_items=DEFAULT_MAX_ITEMS, max_depth=DEFAULT_MAX_DEPTH)
            msg = from_wire(cbor2.loads(raw))
        except Exception as exc:  # a frame that does not decode: the peer's fault, never ours
            log.error("node %s: dropped a frame from %s: %s", self.id, src, exc)
            return
        self.host.deliver(src, msg)

    def _client(self, src: str, body: dict[str, Any]) -> None:
        assert self.host is not None
        try:
            # rid 0: the host runs each request under a ticket of its own (host/executor.py).
            request = request_of(0, src, body, self.level)
        except NotServed as exc:
            self._answer(src, body, {"type": "error", "code": exc.code, "text": str(exc)})
            return

        def respond(result: Result, request: ClientRequest = request) -> None:
            self._answer(src, body, answer_of(request, body, result))

        self.host.submit(request, respond)


def run_maelstrom_node(data_dir: str = "", vnodes: int = 8, level: str = "QUORUM") -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(message)s")
    # Unix seconds, as node processes run: LWW timestamps from different nodes must share one time
    # line (trio's default clock starts at a random offset in every process).
    trio.run(MaelstromNode(data_dir, vnodes, level).run, clock=EpochClock())
