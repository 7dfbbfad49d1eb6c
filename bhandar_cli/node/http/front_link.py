"""The local link between a node and one of its HTTP fronts (node/http/fronts.py): its frames and
their kinds, and a writer that batches them.

A frame is a 4-byte big-endian length and a CBOR array whose first item is its kind and second the
request it is about (an id the front chose, unique on its link). The link is a socket pair the node
made for a child it started, so it is trusted as the node's own memory is: no validation beyond
the framing, and a broken frame ends the link (the front exits; the node starts another).

From the front: READY (0, scheme, [host, port]: it serves; once, first), REQUEST (id, method,
path, raw path, query string, headers, HTTP version, client [host, port], whether the connection is
admitted already, body, more body to come), BODY (id, bytes, more), GONE (id: the client left or
cut its body), ADMITTED (id) or NOT_ADMITTED (id, error code, message, retry-after seconds) in
answer to an ADMIT. From the node: START (id, status, headers, body, more), BODY (id, bytes, more),
ADMIT (id, token id: the request passed the token check; may its connection hold it?), READ (id:
the app reads a body the request frame did not carry), FAILED (id: the app raised; the node logged
why, the front answers 500).
"""

from __future__ import annotations

import contextlib
import math
import struct
from collections.abc import AsyncIterator
from enum import IntEnum
from typing import Any

import cbor2
import trio


class FrameKind(IntEnum):
    """A frame's kind, its first item (the module doc says what each carries)."""

    REQUEST = 0
    BODY = 1
    GONE = 2
    ADMITTED = 3
    NOT_ADMITTED = 4
    START = 5
    ADMIT = 6
    FAILED = 7
    READY = 8
    READ = 9


Frame = list[Any]
_LENGTH = struct.Struct(">I")
MAX_FRAME = 1 << 28  # a response body travels in one frame: far above any value the node holds
READ_SIZE = 1 << 18


class LinkBroken(Exception):
    """The other end of the link went away, or sent a frame that is not one."""


def encode(frame: Frame) -> bytes:
    payload = cbor2.dumps(frame)
    return _LENGTH.pack(len(payload)) + payload


async def read_frames(stream: trio.abc.Stream) -> AsyncIterator[Frame]:
    """The frames `stream` carries, in order, as an async iterator; ends when the other end closes
    the link cleanly; raises LinkBroken if it breaks mid-frame."""
    buffer = bytearray()
    while True:
        try:
            data = await stream.receive_some(READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            if buffer:
                raise LinkBroken("the link closed in the middle of a frame")
            return
        buffer += data
        at = 0
        while len(buffer) - at >= 4:
            (size,) = _LENGTH.unpack_from(buffer, at)
            if size > MAX_FRAME:
                raise LinkBroken(f"a frame of {size} bytes on the link: not a frame")
            if len(buffer) - at - 4 < size:
                break
            try:
                frame = cbor2.loads(bytes(buffer[at + 4 : at + 4 + size]))
            except (cbor2.CBORDecodeError, ValueError) as exc:
                raise LinkBroken(f"a frame on the link does not decode: {exc}") from None
            at += 4 + size
            if not isinstance(frame, list) or len(frame) < 2:
                raise LinkBroken(f"a frame on the link is not [kind, id, ...]: {frame!r:.80}")
            yield frame
        del buffer[:at]


class LinkWriter:
    """Writes frames to the link from one task, as many as are waiting in one write: under load a
    front's requests and a node's answers go out in batches, not a syscall each."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._in, self._out = trio.open_memory_channel[bytes](math.inf)

    def send(self, frame: Frame) -> None:
        """Queue `frame`; it goes out in order with the ones before it. Never blocks: what waits is
        bounded by the requests in flight, which the front's connection cap bounds."""
        with contextlib.suppress(trio.ClosedResourceError):  # the link is over: so is the request
            self._in.send_nowait(encode(frame))

    async def run(self) -> None:
        """Write queued frames until the link breaks (then raise LinkBroken) or this is cancelled."""
        try:
            while True:
                batch = [await self._out.receive()]
                while True:
                    try:
                        batch.append(self._out.receive_nowait())
                    except trio.WouldBlock:
                        break
                await self.stream.send_all(b"".join(batch))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise LinkBroken("the other end of the link went away") from None
        finally:
            self._in.close()
