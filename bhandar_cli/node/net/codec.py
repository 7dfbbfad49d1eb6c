"""Wire framing for node-to-node messages: length-prefixed, versioned CBOR frames, sans-I/O.

This module owns the byte format of every message between nodes and nothing else: it never touches a
socket. A transport feeds whatever bytes arrived into `FrameDecoder.receive_data` and pulls complete
message bodies out of `next_frame`, as h11 does for HTTP (python-hyper/h11, `receive_data` /
`next_event`); the same decoder therefore works over TCP, over an in-memory stream and in tests.

Frame format::

    +----------------------+-------------------------------------------+
    | length: u32, big-end | payload: CBOR array [version: int, body]  |
    +----------------------+-------------------------------------------+

`length` counts the payload bytes only and is at most `max_frame_size` (16 MiB by default).

Version rule (rolling upgrades): a frame whose version v satisfies
``MIN_COMPATIBLE_VERSION <= v <= PROTOCOL_VERSION`` is accepted; a newer one is rejected, since this
node cannot know what it means, and so is one older than `MIN_COMPATIBLE_VERSION`. A version bump
that only adds optional fields keeps `MIN_COMPATIBLE_VERSION`, so old and new nodes interoperate;
a change that old readers would misread must raise it.

Negotiation: every connection opens with a hello frame written in `MIN_COMPATIBLE_VERSION`, which
every reader takes, naming the newest version its writer reads (``"protocol": N``; a hello without
it comes from a version-1 build). Each side then writes ``negotiate(mine, theirs)``: the newest
version both read. Until a side has heard the other's hello it writes the oldest version, which is
always safe. A node started with ``--protocol 1`` limits this process to version 1
(`limit_protocol`): it reads and writes only what a version-1 build does, so a mixed cluster is
exercised for real. What versions 2, 4, 5 and 6 add is listed in core/wire.py (`ADDED_IN`).

Batches (version 3): from `BATCH_VERSION` on, a frame's body is an array of messages, one or many:
the messages a node has for one peer at one moment travel in one frame, which the reader
validates and decodes once, and `next_frame` returns one message at a time as before. A writer
encodes each message once (`encode_body`; a message fanned out to several peers is encoded once
for all) and joins them (`frame_of_bodies`); to a peer that reads only version 2 it writes each
message in a frame of its own. A batch's array counts against neither the depth nor the item
limit, so a message that fits them alone fits them in a batch.

Decoding is strict because a peer may be buggy or hostile: `node/net/cbor_validation.py` checks a
payload's CBOR before cbor2 decodes it (no tags but bignums, no duplicate or non-string map keys,
bounded depth and item count...), and `encode_frame` holds what it sends to the same rules.
"""

from __future__ import annotations

import struct
from typing import Final, NoReturn

import cbor2

from bhandar_cli.node.net.cbor_validation import ProtocolError, check_encodable, validate_cbor
from bhandar_cli.node.net.wire_versions import BATCH_VERSION, MIN_COMPATIBLE_VERSION, PROTOCOL_VERSION

DEFAULT_MAX_FRAME_SIZE: Final = 16 * 1024 * 1024
DEFAULT_MAX_ITEMS: Final = 1 << 20
DEFAULT_MAX_DEPTH: Final = 64

_PREFIX = struct.Struct(">I")
PREFIX_SIZE: Final = _PREFIX.size
# The envelope's first two bytes, per version: an array of 2, and the version (an int below 24 is
# its own byte), as cbor2 writes `[version, body]`.
_ENVELOPES: Final = {v: bytes((0x82, v)) for v in range(MIN_COMPATIBLE_VERSION, PROTOCOL_VERSION + 1)}

_ceiling = PROTOCOL_VERSION  # lowered by `limit_protocol` in a node run as an older version


def limit_protocol(version: int) -> None:
    """Make this process read and write at most `version` (a node run with `--protocol`); a
    process hosts one node, so this is a property of the process, as a build's version is."""
    global _ceiling
    if not MIN_COMPATIBLE_VERSION <= version <= PROTOCOL_VERSION:
        raise ValueError(
            f"protocol {version} is not one this build speaks ({MIN_COMPATIBLE_VERSION}..{PROTOCOL_VERSION})"
        )
    _ceiling = version


def protocol() -> int:
    """The newest version this process reads and writes."""
    return _ceiling


def negotiate(mine: int, theirs: object) -> int:
    """The version to write to a peer whose hello said `theirs` (None/absent: a version-1 build;
    not yet heard: pass None too, the oldest version is always read). Raises ProtocolError for a
    peer too old to read anything this node writes."""
    if theirs is None:
        return MIN_COMPATIBLE_VERSION
    if not isinstance(theirs, int) or isinstance(theirs, bool) or theirs < 1:
        # Named by its type only: the value is the sender's and may be huge (hello.py checks it first).
        raise ProtocolError(f"hello names a protocol of type {type(theirs).__name__}: not a protocol version")
    if theirs < MIN_COMPATIBLE_VERSION:
        raise ProtocolError(
            f"the peer reads protocol {theirs} at most; this node writes "
            f"{MIN_COMPATIBLE_VERSION}..{mine} (upgrade the peer)"
        )
    return min(mine, theirs)


class Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


NEED_DATA: Final = Sentinel("NEED_DATA")
"""`next_frame` needs more bytes before it can return a frame."""

CLOSED: Final = Sentinel("CLOSED")
"""The peer closed the connection cleanly, between two frames; no more frames will come."""

Body = None | bool | int | float | str | bytes | list["Body"] | dict[str | bytes, "Body"]


# --------------------------------------------------------------------------------------------- encode


def encode_frame(
    body: object,
    *,
    version: int | None = None,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> bytes:
    """One frame carrying `body`: None, bool, int, float, str, bytes, lists/tuples and dicts with
    str or bytes keys. Tuples arrive as lists and bytearrays as bytes.

    `version` defaults to the newest this process writes (`protocol()`).

    Raises ValueError (a TypeError would hide that the limits are part of the protocol) when the
    body holds another type, breaks a limit, or the frame would exceed `max_frame_size`.
    """
    if version is None:
        version = _ceiling
    if not MIN_COMPATIBLE_VERSION <= version <= _ceiling:
        raise ValueError(
            f"cannot write protocol version {version}: this node writes {MIN_COMPATIBLE_VERSION}..{_ceiling}"
        )
    check_encodable(body, max_items=max_items, max_depth=max_depth)
    payload = cbor2.dumps([version, [body] if version >= BATCH_VERSION else body])
    if len(payload) > max_frame_size:
        raise ValueError(f"frame of {len(payload)} bytes exceeds the maximum frame size of {max_frame_size}")
    return _PREFIX.pack(len(payload)) + payload


def encode_body(body: object) -> bytes:
    """One message's CBOR, for `frame_of_bodies`: for bodies of our own making (`to_wire`, RPC
    envelopes), which hold only str-keyed maps, lists and plain scalars by construction, so
    `encode_frame`'s checking walk is not repeated here."""
    return cbor2.dumps(body)


def frame_of_bodies(version: int, bodies: list[bytes], max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> bytes:
    """One frame of encoded bodies (`encode_body`): a batch of all of them at `BATCH_VERSION` or
    later; before it, exactly one. Raises ValueError past `max_frame_size`."""
    if version >= BATCH_VERSION:
        count = len(bodies)
        if count < 24:
            head = bytes((0x80 | count,))
        elif count < 0x10000:
            head = (b"\x98" + bytes((count,))) if count < 0x100 else (b"\x99" + count.to_bytes(2, "big"))
        else:
            head = b"\x9a" + count.to_bytes(4, "big")
        payload = b"".join((_ENVELOPES[version], head, *bodies))
    else:
        if len(bodies) != 1:
            raise ValueError(f"protocol {version} carries one message per frame, not {len(bodies)}")
        payload = _ENVELOPES[version] + bodies[0]
    if len(payload) > max_frame_size:
        raise ValueError(f"frame of {len(payload)} bytes exceeds the maximum frame size of {max_frame_size}")
    return _PREFIX.pack(len(payload)) + payload


# --------------------------------------------------------------------------------------------- decode


class FrameDecoder:
    """Turns a byte stream into message bodies; one decoder per connection direction.

    Call `receive_data` with each chunk as it arrives (b"" at end of stream), then `next_frame`
    until it returns `NEED_DATA` (or `CLOSED`). After a `ProtocolError` the stream cannot be
    resynchronised, so every later `next_frame` raises the same error: close the connection.
    """

    def __init__(
        self,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_items: int = DEFAULT_MAX_ITEMS,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_version: int | None = None,
    ) -> None:
        if not 0 < max_frame_size <= 0xFFFFFFFF:
            raise ValueError("max_frame_size must be in 1..2**32-1")
        self.max_frame_size = max_frame_size
        self.max_items = max_items
        self.max_depth = max_depth
        self.max_version = _ceiling if max_version is None else max_version
        """The newest version this decoder reads (this process's, unless told)."""
        self.peer_version: int | None = None
        """The protocol version of the last frame decoded (None before the first)."""
        self._buffer = bytearray()
        self._batch: list[Body] = []  # the rest of the last batch, in reverse order
        self._payload_size: int | None = None  # set once the current frame's prefix has been read
        self._eof = False
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buffer)

    def receive_data(self, data: bytes | bytearray) -> None:
        """Add bytes from the peer; b"" means the peer closed its side."""
        if self._eof:
            raise RuntimeError("receive_data after end of stream (b'')")
        if not data:
            self._eof = True
            return
        if self._error is not None:
            return  # the connection is dead: keep nothing
        self._buffer += data
        # Check a new length prefix now, not on the next `next_frame`, so a caller that feeds a
        # long stream before pulling frames never buffers the body of an oversized frame.
        self._read_prefix()

    def next_frame(self) -> Body | Sentinel:
        """The next frame's body, `NEED_DATA`, or `CLOSED`; raises `ProtocolError`."""
        if self._error is not None:
            raise self._error
        if self._batch:
            return self._batch.pop()
        try:
            return self._next_frame()
        except ProtocolError as exc:
            self._error = exc
            self._buffer.clear()
            raise

    def _next_frame(self) -> Body | Sentinel:
        self._read_prefix()
        if self._error is not None:
            raise self._error
        size = self._payload_size
        if size is None or len(self._buffer) < PREFIX_SIZE + size:
            if not self._eof:
                return NEED_DATA
            if not self._buffer:
                return CLOSED
            if size is None:
                raise ProtocolError(
                    f"connection closed mid-frame: {len(self._buffer)} of {PREFIX_SIZE} length-prefix bytes"
                )
            raise ProtocolError(
                f"connection closed mid-frame: {len(self._buffer)} of {PREFIX_SIZE + size} bytes"
            )
        payload = bytes(self._buffer[PREFIX_SIZE : PREFIX_SIZE + size])
        # bytearray deletes from the front in amortised O(1), so byte-by-byte feeding stays linear.
        del self._buffer[: PREFIX_SIZE + size]
        self._payload_size = None
        return self._decode_payload(payload)

    def _read_prefix(self) -> None:
        if self._payload_size is not None or len(self._buffer) < PREFIX_SIZE:
            return
        (size,) = _PREFIX.unpack_from(self._buffer)
        if size > self.max_frame_size:
            self._error = ProtocolError(
                f"frame length {size} exceeds the maximum frame size of {self.max_frame_size} bytes"
            )
            self._buffer.clear()
            return
        self._payload_size = size

    def _decode_payload(self, payload: bytes) -> Body:
        if not payload:
            raise ProtocolError("undecodable CBOR: empty payload")
        # A batch's array counts against no limit (read before validating: the version is the
        # payload's second byte; a frame that lies about it fails below as any other).
        batch = len(payload) > 1 and payload[0] == 0x82 and BATCH_VERSION <= payload[1] < 24
        validate_cbor(payload, max_items=self.max_items, max_depth=self.max_depth, batch=batch)
        try:
            envelope = cbor2.loads(payload, tag_hook=_reject_tag)
        except (cbor2.CBORDecodeError, ValueError, TypeError, OverflowError) as exc:
            raise ProtocolError(f"undecodable CBOR: {exc}") from exc
        if not (isinstance(envelope, list) and len(envelope) == 2):
            raise ProtocolError(f"wrong envelope: expected [version, body], got {_describe(envelope)}")
        version, body = envelope
        if not isinstance(version, int) or isinstance(version, bool):
            raise ProtocolError(
                f"wrong envelope: protocol version must be an integer, got {_describe(version)}"
            )
        if version > self.max_version:
            raise ProtocolError(
                f"unsupported protocol version {version}: this node reads "
                f"{MIN_COMPATIBLE_VERSION}..{self.max_version} (upgrade it to talk to this peer)"
            )
        if version < MIN_COMPATIBLE_VERSION:
            raise ProtocolError(
                f"unsupported protocol version {version}: this node reads "
                f"{MIN_COMPATIBLE_VERSION}..{self.max_version} (the peer is too old)"
            )
        self.peer_version = version
        if version < BATCH_VERSION:
            decoded: Body = body
            return decoded
        if not (isinstance(body, list) and body):
            raise ProtocolError(f"wrong envelope: a version {version} frame carries an array of messages")
        if len(body) > 1:
            self._batch = body[:0:-1]
        first: Body = body[0]
        return first


def _reject_tag(*args: object) -> NoReturn:
    # Defence in depth: `validate_cbor` has already refused every tag cbor2 would pass here.
    # cbor2 5 calls tag_hook(decoder, tag), cbor2 6 tag_hook(tag, immutable): find the tag.
    tag = next((a for a in args if isinstance(a, cbor2.CBORTag)), None)
    raise ProtocolError(f"unexpected CBOR tag {'?' if tag is None else tag.tag}")


def _describe(value: object) -> str:
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    return type(value).__name__


__all__ = [
    "BATCH_VERSION",
    "CLOSED",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_MAX_ITEMS",
    "MIN_COMPATIBLE_VERSION",
    "NEED_DATA",
    "PREFIX_SIZE",
    "PROTOCOL_VERSION",
    "Body",
    "FrameDecoder",
    "ProtocolError",
    "encode_body",
    "encode_frame",
    "frame_of_bodies",
    "limit_protocol",
    "negotiate",
    "protocol",
]
