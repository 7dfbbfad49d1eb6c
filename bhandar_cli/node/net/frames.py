"""Frames on a trio stream: reading them with timeouts, writing them in batches.

`FrameConn` reads codec frames from a stream in large chunks, returning every complete frame of a
chunk before it reads again, and closes it on garbage, an oversized length prefix or a frame left
half-sent for `frame_timeout` seconds. `Outbox` writes everything queued in one `send_all`, which
is most of the throughput under load, and the messages among it in one frame (a batch, protocol 3:
node/net/codec.py). `wire_frame` encodes our own bodies without the codec's checking walk.
"""

from __future__ import annotations

import functools
import math
import struct
from typing import Any

import cbor2
import trio

from bhandar_cli.node.net import codec
from bhandar_cli.node.net.cbor_validation import ProtocolError
from bhandar_cli.node.net.codec import (
    CLOSED,
    DEFAULT_MAX_FRAME_SIZE,
    NEED_DATA,
    Body,
    FrameDecoder,
    Sentinel,
    encode_body,
    frame_of_bodies,
)
from bhandar_cli.node.net.tls_stream import TlsStream, Truncated
from bhandar_cli.node.net.wire_versions import BATCH_VERSION

RECV_SIZE = 65536
PEER_QUEUE = 4096  # messages waiting for one peer; beyond it they are dropped
OUTBOX_FRAMES = 8192
BATCH_FRAMES = 512
# A batch stops growing past this many bytes (one frame alone may be bigger): a batch of values at
# the size limit must not outlast SEND_TIMEOUT on a busy machine, which would drop the link.
BATCH_BYTES = 1 << 20
# One frame of several messages holds at most this many bytes of them (a message beyond it goes in
# a frame of its own): well below the reader's item limit, which an item per byte cannot reach.
BATCH_FRAME_BYTES = 256 << 10
SMALL_FRAME = 64 << 10  # frames up to this size leave ahead of bigger ones queued with them
CONNECT_TIMEOUT = 1.0
SEND_TIMEOUT = 2.0  # a peer that does not read for this long is treated as down
HELLO_TIMEOUT = 5.0
FRAME_TIMEOUT = 5.0
BACKOFF_MIN, BACKOFF_MAX = 0.05, 1.0

_PREFIX = struct.Struct(">I")  # the codec's length prefix
Counts = dict[str, int]
STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class FrameConn:
    """The receiving half of a connection: frames out of a stream, with a per-frame deadline."""

    def __init__(self, stream: trio.abc.Stream, frame_timeout: float = FRAME_TIMEOUT) -> None:
        self.stream = stream
        self.frame_timeout = frame_timeout
        self.decoder = FrameDecoder()
        self._frame_deadline = math.inf

    @functools.cached_property
    def peer(self) -> str:
        """The other end's "host:port", whatever the stream is layered on (TLS over TCP). Read
        once: the peer gate names it with every message, and a syscall per message showed."""
        stream: Any = self.stream
        while hasattr(stream, "transport_stream"):  # TlsStream, trio.SSLStream
            stream = stream.transport_stream
        try:
            host, port = stream.socket.getpeername()[:2]
        except (OSError, AttributeError):
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
                assert not isinstance(body, Sentinel)  # CLOSED and NEED_DATA are handled above
                return body
            if not decoder.buffered:
                # Between frames there is nothing to time, so no cancel scope: one per read was a
                # visible share of a node's time under load.
                decoder.receive_data(await self._receive_some())
                continue
            if self._frame_deadline == math.inf:
                self._frame_deadline = trio.current_time() + self.frame_timeout
            # The deadline covers the whole frame, so a peer trickling one byte at a time cannot
            # hold a connection (and its buffer) open forever.
            with trio.move_on_at(self._frame_deadline):
                decoder.receive_data(await self._receive_some())
                continue
            raise ProtocolError(
                f"incomplete frame: {decoder.buffered} bytes and nothing more for {self.frame_timeout:g} s"
            )

    async def _receive_some(self) -> bytes | bytearray:
        """The next bytes of the stream; b"" at its end or when it broke. A TLS stream cut without
        close_notify raises `Truncated` (tls_stream.py): that end is not the other side's word."""
        try:
            return await self.stream.receive_some(RECV_SIZE)
        except Truncated:
            raise
        except STREAM_ERRORS:
            return b""


class Outbox:
    """The sending half: frames and messages queued without waiting, written in batches by `run`."""

    def __init__(self, stream: trio.abc.SendStream, capacity: int = OUTBOX_FRAMES) -> None:
        self.stream = stream
        # The protocol version this connection's frames are written in: the oldest until the
        # other side's hello says what it reads (codec.negotiate).
        self.version = codec.MIN_COMPATIBLE_VERSION
        # (0, a whole frame) or (version, one message's encoded body), in the order queued.
        self._send, self._recv = trio.open_memory_channel[tuple[int, bytes]](capacity)

    def put(self, frame: bytes) -> bool:
        """Queue a frame; False if the connection is closed or the reader is not keeping up."""
        return self._queue((0, frame))

    def put_message(self, body: Any) -> bool:
        """Queue one message of our own making (`wire_frame`'s bodies), written in this
        connection's version: with the others queued at the same moment in one frame from
        version 3 on. False as `put`."""
        return self._queue((self.version, checked_body(body)))

    def _queue(self, item: tuple[int, bytes]) -> bool:
        try:
            self._send.send_nowait(item)
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
                first = await recv.receive()
            except trio.EndOfChannel:
                return
            await let_others_queue()
            items, size = [first], len(first[1])
            while len(items) < BATCH_FRAMES and size < BATCH_BYTES:
                try:
                    items.append(recv.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                size += len(items[-1][1])
            chunks = small_first(framed(items))
            await send_within(self.stream, b"".join(chunks) if len(chunks) > 1 else chunks[0])


async def send_messages(
    stream: trio.abc.SendStream, items: list[tuple[int, bytes]], stats: dict[str, int]
) -> None:
    """`framed(items)` in one write (`send_within`), counted in `stats` ("writes", "frames")."""
    frames = framed(items)
    stats["writes"] += 1
    stats["frames"] += len(frames)
    await send_within(stream, b"".join(frames) if len(frames) > 1 else frames[0])


def checked_body(body: Any) -> bytes:
    """`encode_body(body)`, or ValueError when it could not fit in a frame (as `wire_frame`)."""
    data = encode_body(body)
    if len(data) > DEFAULT_MAX_FRAME_SIZE - 16:  # the envelope and a batch's head
        raise ValueError(
            f"a message of {len(data)} bytes exceeds the maximum frame size of {DEFAULT_MAX_FRAME_SIZE}"
        )
    return data


def framed(items: list[tuple[int, bytes]]) -> list[bytes]:
    """Frames for queued items, in order: (0, frame) as it is; (version, body) runs of one version
    joined into frames of several messages from BATCH_VERSION on (up to BATCH_FRAME_BYTES of
    them), one frame each before it."""
    frames: list[bytes] = []
    run: list[bytes] = []
    run_version = run_size = 0
    for version, data in items:
        if run and (version != run_version or run_size + len(data) > BATCH_FRAME_BYTES):
            frames.append(frame_of_bodies(run_version, run))
            run, run_size = [], 0
        if not version:
            frames.append(data)
        elif version < BATCH_VERSION:
            frames.append(frame_of_bodies(version, [data]))
        else:
            run.append(data)
            run_version, run_size = version, run_size + len(data)
    if run:
        frames.append(frame_of_bodies(run_version, run))
    return frames


def small_first(frames: list[bytes]) -> list[bytes]:
    """The small frames of a batch (gossip, acks, small values and answers) ahead of the big ones
    queued at the same moment: writing a value at the size limit takes tens of milliseconds on a
    busy machine, and what waits behind it should not. Nothing relies on the order of frames on
    one connection (answers name their call; the core takes reordered messages, as the network
    model makes them)."""
    if len(frames) < 2 or all(len(f) <= SMALL_FRAME for f in frames):
        return frames
    return [f for f in frames if len(f) <= SMALL_FRAME] + [f for f in frames if len(f) > SMALL_FRAME]


async def send_within(stream: trio.abc.SendStream, data: bytes) -> None:
    """`stream.send_all(data)`, or TooSlowError after SEND_TIMEOUT (a peer not reading).

    A stream that can write without waiting (tls_stream.py `TlsStream.send_nowait`) does so first,
    and only what the kernel did not take is sent under the timeout: a peer that keeps up costs no
    cancel scope, which with its deadline was a visible share of a node's time with one per batch
    written. Otherwise a bare cancel scope rather than `trio.fail_after`, whose generator-based
    context manager cost half as much as the send itself.
    """
    if isinstance(stream, TlsStream):
        if stream.send_nowait(data):
            return
        with trio.move_on_after(SEND_TIMEOUT) as scope:
            await stream.flush()
    else:
        with trio.move_on_after(SEND_TIMEOUT) as scope:
            await stream.send_all(data)
    if scope.cancelled_caught:
        raise trio.TooSlowError(f"a write was not taken within {SEND_TIMEOUT:g} s")


async def let_others_queue() -> None:
    """Give every task that is already runnable one turn before a write takes its batch.

    A writer is woken by the first frame queued for it, but the frames that answer the same
    burst of reads (replies to several calls, the acks of several writes) are queued by tasks
    that run just after: one turn later they all leave in one `send_all`, one syscall and, over
    TLS, one record, where each alone costs about as much as all together. The profile of a node
    under `bench --cluster` had 40% of its busy time in send syscalls before this.
    """
    await trio.lowlevel.cancel_shielded_checkpoint()


def wire_frame(body: Any, version: int | None = None) -> bytes:
    """Exactly `encode_frame(body)` for a body of our own making, without its checking walk.

    The walk costs five times the encoding itself, and it re-proves what is true by construction
    here: `to_wire` and our RPC envelopes only make str-keyed maps, lists and plain scalars. Data
    from elsewhere (admin views) still goes through `encode_frame`. The size limit is kept.
    """
    if version is None:
        version = codec.protocol()
    payload = cbor2.dumps([version, [body] if version >= BATCH_VERSION else body])
    if len(payload) > DEFAULT_MAX_FRAME_SIZE:
        raise ValueError(
            f"frame of {len(payload)} bytes exceeds the maximum frame size of {DEFAULT_MAX_FRAME_SIZE}"
        )
    return _PREFIX.pack(len(payload)) + payload
