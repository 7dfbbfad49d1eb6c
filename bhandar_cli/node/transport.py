"""TCP for node processes on trio: length-prefixed CBOR frames (node/codec.py) over streams.

This module owns:
- `TcpTransport`, a node's network of peers behind the `send(src, dst, msg)` that NodeRuntime
  uses with the in-memory network. One outbound connection per peer, reused, reconnected with
  jittered exponential backoff. Per-peer queues are bounded and a peer that is down or slow costs
  dropped messages, never a blocked node (Dynamo's protocol already survives lost messages). The
  operator's partitions and delays are enforced here, on both the sending and receiving side.
- The listener. Every connection opens with a hello frame: `{"hello": "peer", "id": X}` starts a
  one-way stream of messages from node X; `{"hello": "client"}` starts request/response RPC,
  served by the node (`on_client`). Garbage, an oversized length prefix or a frame left half-sent
  for `frame_timeout` seconds closes the connection; the node goes on serving the others.
- `FrameConn` / `Outbox`: read frames with those timeouts; write frames in batches (one syscall
  for everything queued, which is most of the throughput under load).
- `RpcClient`: a pipelined RPC connection (many calls in flight, answers matched by id).
"""

from __future__ import annotations

import logging
import math
import random
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import cbor2
import trio

from bhandar_cli.core.wire import from_wire, to_wire
from bhandar_cli.node.codec import (
    CLOSED,
    DEFAULT_MAX_FRAME_SIZE,
    NEED_DATA,
    PROTOCOL_VERSION,
    Body,
    FrameDecoder,
    ProtocolError,
    encode_frame,
)

log = logging.getLogger("bhandar.transport")

RECV_SIZE = 65536
PEER_QUEUE = 4096  # messages waiting for one peer; beyond it they are dropped
OUTBOX_FRAMES = 8192
BATCH_FRAMES = 512
CONNECT_TIMEOUT = 1.0
SEND_TIMEOUT = 2.0  # a peer that does not read for this long is treated as down
HELLO_TIMEOUT = 5.0
FRAME_TIMEOUT = 5.0
BACKOFF_MIN, BACKOFF_MAX = 0.05, 1.0

_PREFIX = struct.Struct(">I")  # the codec's length prefix
_STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class FrameConn:
    """The receiving half of a connection: frames out of a stream, with a per-frame deadline."""

    def __init__(self, stream: trio.SocketStream, frame_timeout: float = FRAME_TIMEOUT) -> None:
        self.stream = stream
        self.frame_timeout = frame_timeout
        self.decoder = FrameDecoder()
        self._frame_deadline = math.inf

    @property
    def peer(self) -> str:
        try:
            host, port = self.stream.socket.getpeername()[:2]
        except OSError:
            return "?"
        return f"{host}:{port}"

    async def receive(self) -> Body | None:
        """The next frame's body, None at a clean end; raises ProtocolError (close the stream)."""
        decoder = self.decoder
        while True:
            body = decoder.next_frame()
            if body is CLOSED:
                return None
            if body is not NEED_DATA:
                self._frame_deadline = (
                    math.inf if not decoder.buffered else trio.current_time() + (self.frame_timeout)
                )
                return body
            if decoder.buffered and self._frame_deadline == math.inf:
                self._frame_deadline = trio.current_time() + self.frame_timeout
            # The deadline covers the whole frame, so a peer trickling one byte at a time cannot
            # hold a connection (and its buffer) open forever.
            with trio.move_on_at(self._frame_deadline):
                try:
                    data = await self.stream.receive_some(RECV_SIZE)
                except _STREAM_ERRORS:
                    data = b""
                decoder.receive_data(data)
                continue
            raise ProtocolError(
                f"incomplete frame: {decoder.buffered} bytes and nothing more for {self.frame_timeout:g} s"
            )


class Outbox:
    """The sending half: frames queued without waiting, written in batches by `run`."""

    def __init__(self, stream: trio.abc.SendStream, capacity: int = OUTBOX_FRAMES) -> None:
        self.stream = stream
        self._send, self._recv = trio.open_memory_channel[bytes](capacity)

    def put(self, frame: bytes) -> bool:
        """Queue a frame; False if the connection is closed or the reader is not keeping up."""
        try:
            self._send.send_nowait(frame)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        return True

    def close(self) -> None:
        self._send.close()

    async def run(self) -> None:
        """Write until the stream breaks (raises) or `close` (returns)."""
        recv = self._recv
        while True:
            try:
                chunks = [await recv.receive()]
            except trio.EndOfChannel:
                return
            while len(chunks) < BATCH_FRAMES:
                try:
                    chunks.append(recv.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            with trio.fail_after(SEND_TIMEOUT):
                await self.stream.send_all(b"".join(chunks) if len(chunks) > 1 else chunks[0])


class TcpTransport:
    """A node's links to its peers, and its listener."""

    def __init__(
        self,
        me: str,
        on_message: Callable[[str, Any], None],
        on_client: Callable[[FrameConn], Awaitable[None]],
        frame_timeout: float = FRAME_TIMEOUT,
    ) -> None:
        self.me = me
        self.on_message = on_message
        self.on_client = on_client
        self.frame_timeout = frame_timeout
        self.addresses: dict[str, tuple[str, int]] = {}
        self.blocked: set[str] = set()  # peers on the other side of a partition
        self.delays: dict[str, float] = {}  # node -> extra seconds on every message to or from it
        self.stats = dict.fromkeys(
            ("sent", "received", "dropped", "connects", "connect_failures", "rejected"), 0
        )
        self._links: dict[str, _PeerLink] = {}
        self._nursery: trio.Nursery | None = None
        self._last_msg: Any = None
        self._last_frame = b""

    # --- the NodeRuntime side ----------------------------------------------------------------

    def send(self, src: str, dst: str, msg: Any) -> None:
        """Queue `msg` for `dst`; never blocks. Dropped if `dst` is partitioned away or backed up."""
        if dst in self.blocked or dst not in self.addresses or self._nursery is None:
            self.stats["dropped"] += 1
            return
        link = self._links.get(dst)
        if link is None:
            link = self._links[dst] = _PeerLink(self, dst)
            self._nursery.start_soon(link.run)
        # The coordinator sends one message object to several replicas: encode it once.
        if msg is not self._last_msg:
            try:
                self._last_frame = wire_frame(to_wire(msg))
            except ValueError:
                self.stats["dropped"] += 1
                log.exception("cannot encode %s for %s (a bug); dropped", type(msg).__name__, dst)
                return
            self._last_msg = msg
        extra = self.delays.get(src, 0.0) + self.delays.get(dst, 0.0)
        if link.offer(trio.current_time() + extra if extra else 0.0, self._last_frame):
            self.stats["sent"] += 1
        else:
            self.stats["dropped"] += 1

    def set_address(self, peer: str, host: str, port: int) -> None:
        if self.addresses.get(peer) != (host, port):
            self.addresses[peer] = (host, port)
            link = self._links.get(peer)
            if link is not None:
                link.reconnect()  # the peer restarted elsewhere: drop the old connection

    def connected(self) -> list[str]:
        return sorted(p for p, link in self._links.items() if link.connected)

    # --- listening ---------------------------------------------------------------------------

    async def serve(self, host: str, port: int, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED):
        """Listen on host:port; reports the bound port when ready; runs until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            listeners = await nursery.start(partial(trio.serve_tcp, self._handle, port, host=host))
            task_status.started(listeners[0].socket.getsockname()[1])

    async def _handle(self, stream: trio.SocketStream) -> None:
        conn = FrameConn(stream, self.frame_timeout)
        try:
            with trio.fail_after(HELLO_TIMEOUT):
                hello = await conn.receive()
            if hello is None:
                return
            kind = hello.get("hello") if isinstance(hello, dict) else None
            if kind == "peer" and isinstance(hello.get("id"), str):  # type: ignore[union-attr]
                await self._peer_loop(conn, hello["id"])  # type: ignore[index]
            elif kind == "client":
                await self.on_client(conn)
            else:
                raise ProtocolError("the first frame must be a hello ({'hello': 'peer'|'client'})")
        except (ProtocolError, trio.TooSlowError) as exc:
            self.stats["rejected"] += 1
            log.warning("closed the connection from %s: %s", conn.peer, exc or "no hello in time")
        except _STREAM_ERRORS:
            pass  # the other side went away; nothing to tell
        except Exception:
            # A bug in serving one connection must not take the node (this handler's nursery) down.
            log.exception("internal error serving %s; connection closed", conn.peer)
        finally:
            await trio.aclose_forcefully(stream)

    async def _peer_loop(self, conn: FrameConn, src: str) -> None:
        while (body := await conn.receive()) is not None:
            try:
                msg = from_wire(body)
            except Exception as exc:  # from_wire's checks and the dataclasses' own validation
                raise ProtocolError(f"peer {src} sent a message this node cannot read: {exc}") from exc
            self.stats["received"] += 1
            if src in self.blocked:
                self.stats["dropped"] += 1
                continue
            delay = self.delays.get(src, 0.0) if src not in self.addresses else 0.0
            if delay:
                # Only for senders we cannot send to (they applied no delay of theirs); a known
                # peer's sending side already added both ends' delays.
                await trio.sleep(delay)
            self.on_message(src, msg)


class _PeerLink:
    """The outbound connection to one peer, and the bounded queue of messages for it."""

    def __init__(self, transport: TcpTransport, peer: str) -> None:
        self.transport = transport
        self.peer = peer
        self.connected = False
        self._send, self._recv = trio.open_memory_channel[tuple[float, bytes]](PEER_QUEUE)
        self._scope: trio.CancelScope | None = None

    def offer(self, due: float, frame: bytes) -> bool:
        try:
            self._send.send_nowait((due, frame))
        except trio.WouldBlock:
            return False
        return True

    def reconnect(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def run(self) -> None:
        stats = self.transport.stats
        backoff = BACKOFF_MIN
        while True:
            address = self.transport.addresses[self.peer]
            try:
                with trio.fail_after(CONNECT_TIMEOUT):
                    stream = await trio.open_tcp_stream(*address)
            except (OSError, trio.TooSlowError):
                stats["connect_failures"] += 1
                # While the peer is unreachable its messages are dropped, not saved for later:
                # a burst of stale pings and writes on reconnect would only mislead it.
                await self._drop_for(backoff * random.uniform(0.5, 1.5))
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            stats["connects"] += 1
            backoff = BACKOFF_MIN
            try:
                with trio.CancelScope() as self._scope:
                    self.connected = True
                    await stream.send_all(encode_frame({"hello": "peer", "id": self.transport.me}))
                    await self._pump(stream)
            except (*_STREAM_ERRORS, trio.TooSlowError):
                pass
            finally:
                self.connected = False
                self._scope = None
                await trio.aclose_forcefully(stream)

    async def _drop_for(self, seconds: float) -> None:
        with trio.move_on_after(seconds):
            while True:
                await self._recv.receive()
                self.transport.stats["dropped"] += 1

    async def _pump(self, stream: trio.SocketStream) -> None:
        transport, recv = self.transport, self._recv
        while True:
            batch = [await recv.receive()]
            while len(batch) < BATCH_FRAMES:
                try:
                    batch.append(recv.receive_nowait())
                except trio.WouldBlock:
                    break
            frames: list[bytes] = []
            for due, frame in batch:
                if due and due > trio.current_time():
                    if frames:
                        await _send_frames(stream, frames)
                        frames = []
                    await trio.sleep_until(due)
                if self.peer in transport.blocked:  # partitioned while the message waited
                    transport.stats["dropped"] += 1
                    continue
                frames.append(frame)
            if frames:
                await _send_frames(stream, frames)


async def _send_frames(stream: trio.SocketStream, frames: list[bytes]) -> None:
    with trio.fail_after(SEND_TIMEOUT):
        await stream.send_all(b"".join(frames))


# --- RPC client ----------------------------------------------------------------------------------


class RpcError(Exception):
    """An RPC that got no answer (`kind` unreachable or timeout) or an error answer (remote)."""

    def __init__(self, message: str, kind: str = "remote") -> None:
        super().__init__(message)
        self.kind = kind


class _Slot:
    __slots__ = ("body", "event")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.body: Any = None


class RpcClient:
    """One client connection to a node; `call` may be used by many tasks at once."""

    def __init__(self, host: str, port: int, label: str = "", frame_timeout: float = FRAME_TIMEOUT) -> None:
        self.host, self.port = host, port
        self.label = label or f"{host}:{port}"
        self.frame_timeout = frame_timeout
        self.closed = False
        self._pending: dict[int, _Slot] = {}
        self._next_id = 0
        self._outbox: Outbox | None = None
        self._stream: trio.SocketStream | None = None
        self._lost = "not connected"

    async def connect(self) -> None:
        """Open the connection; raises RpcError (unreachable) if the node does not take it.

        Kept apart from `serve` so the error reaches the caller as itself, not wrapped in the
        exception group of whatever nursery will host `serve`.
        """
        try:
            with trio.fail_after(CONNECT_TIMEOUT):
                self._stream = await trio.open_tcp_stream(self.host, self.port)
        except (OSError, trio.TooSlowError) as exc:
            self.closed = True
            why = "no answer" if isinstance(exc, trio.TooSlowError) else _why(exc)
            raise RpcError(
                f"node {self.label} is not answering at {self.host}:{self.port} ({why})", "unreachable"
            ) from None
        self._outbox = Outbox(self._stream)
        self._outbox.put(encode_frame({"hello": "client"}))

    async def serve(self) -> None:
        """Write calls and read answers until the connection ends (never raises)."""
        assert self._stream is not None, "connect() first"
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write, nursery.cancel_scope)
                await self._read(FrameConn(self._stream, self.frame_timeout))
                nursery.cancel_scope.cancel()
        finally:
            self._close("the connection closed")
            await trio.aclose_forcefully(self._stream)

    async def _write(self, scope: trio.CancelScope) -> None:
        assert self._outbox is not None
        try:
            await self._outbox.run()
        except (*_STREAM_ERRORS, trio.TooSlowError) as exc:
            self._lost = f"sending failed: {exc}"
        scope.cancel()

    async def _read(self, conn: FrameConn) -> None:
        try:
            while (body := await conn.receive()) is not None:
                if isinstance(body, dict):
                    slot = self._pending.pop(body.get("id"), None)  # type: ignore[arg-type]
                    if slot is not None:
                        slot.body = body
                        slot.event.set()
            self._lost = "the node closed the connection"
        except ProtocolError as exc:
            self._lost = f"the node sent bad frames ({exc})"

    def _close(self, why: str) -> None:
        self.closed = True
        if self._outbox is not None:
            self._outbox.close()
        pending, self._pending = self._pending, {}
        for slot in pending.values():
            slot.event.set()  # body stays None: lost

    async def call(self, op: str, timeout: float = 5.0, **args: Any) -> Any:
        """Send one request; its answer's body. Raises RpcError."""
        if self.closed or self._outbox is None:
            raise RpcError(f"connection to node {self.label} lost ({self._lost})", "unreachable")
        self._next_id += 1
        rid = self._next_id
        slot = self._pending[rid] = _Slot()
        if not self._outbox.put(wire_frame({"id": rid, "op": op, **args})):
            self._pending.pop(rid, None)
            raise RpcError(f"too many requests in flight to node {self.label}", "timeout")
        with trio.move_on_after(timeout):
            await slot.event.wait()
        self._pending.pop(rid, None)
        body = slot.body
        if body is None:
            if slot.event.is_set():
                raise RpcError(f"connection to node {self.label} lost ({self._lost})", "unreachable")
            raise RpcError(f"node {self.label} did not answer {op!r} within {timeout:g} s", "timeout")
        if not body.get("ok"):
            raise RpcError(f"node {self.label}: {body.get('error', 'failed')}")
        return body.get("body")


@asynccontextmanager
async def open_rpc(host: str, port: int, label: str = "") -> AsyncIterator[RpcClient]:
    """An RpcClient for the duration of the block; errors in the block come out as themselves."""
    client = RpcClient(host, port, label)
    await client.connect()
    async with hosting(client.serve) as error:
        try:
            yield client
        except Exception as exc:
            error.append(exc)


@asynccontextmanager
async def hosting(*services: Callable[[], Awaitable[None]]) -> AsyncIterator[list[BaseException]]:
    """Run background services around a block, then cancel them.

    With strict exception groups a failure in the block would come out of the nursery wrapped in
    an ExceptionGroup; the block puts its error in the yielded list instead and it is raised bare
    once the services are stopped.
    """
    error: list[BaseException] = []
    async with trio.open_nursery() as nursery:
        for service in services:
            nursery.start_soon(service)
        try:
            yield error
        finally:
            nursery.cancel_scope.cancel()
    if error:
        raise error[0]


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


async def rpc_once(host: str, port: int, op: str, timeout: float = 2.0, label: str = "", **args: Any) -> Any:
    """Connect, make one call, disconnect (for probes and one-off admin commands)."""
    with trio.fail_after(timeout + CONNECT_TIMEOUT + 1.0):
        async with open_rpc(host, port, label) as client:
            return await client.call(op, timeout, **args)


def wire_frame(body: Any) -> bytes:
    """Exactly `encode_frame(body)` for a body of our own making, without its checking walk.

    The walk costs five times the encoding itself, and it re-proves what is true by construction
    here: `to_wire` and our RPC envelopes only make str-keyed maps, lists and plain scalars. Data
    from elsewhere (admin views) still goes through `encode_frame`. The size limit is kept.
    """
    payload = cbor2.dumps([PROTOCOL_VERSION, body])
    if len(payload) > DEFAULT_MAX_FRAME_SIZE:
        raise ValueError(
            f"frame of {len(payload)} bytes exceeds the maximum frame size of {DEFAULT_MAX_FRAME_SIZE}"
        )
    return _PREFIX.pack(len(payload)) + payload
