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

Version rule (rolling upgrades, DESIGN.md §6): a frame whose version v satisfies
``MIN_COMPATIBLE_VERSION <= v <= PROTOCOL_VERSION`` is accepted; a newer one is rejected, since this
node cannot know what it means, and so is one older than `MIN_COMPATIBLE_VERSION`. A version bump
that only adds optional fields keeps `MIN_COMPATIBLE_VERSION`, so old and new nodes interoperate;
a change that old readers would misread must raise it. A new node talking to an old one sends with
``encode_frame(body, version=decoder.peer_version)``: `peer_version` is the version of the last frame
the peer sent.

Decoding is strict because a peer may be buggy or hostile. Before cbor2 sees a payload, a small
validator walks its item headers and rejects:

- semantic tags other than bignums (2, 3). cbor2 decodes many tags itself (datetime, regex,
  set, shared references that can build cycles, MIME messages...) *without* consulting
  `tag_hook`, so a `tag_hook` alone would not keep them out; we reject them before cbor2 runs;
- indefinite-length items, undefined and other simple values (our encoder never produces them);
- map keys that are not text or byte strings, and duplicate keys. Python's `hash()` of ints and
  floats is not randomised, so a peer could otherwise send a map of colliding keys and make
  decoding quadratic (hash flooding); `str` and `bytes` hashes are salted per process;
- declared lengths larger than the bytes left in the frame, trailing bytes after the item;
- nesting deeper than `max_depth` and more than `max_items` data items. cbor2 (6.x) does not
  preallocate from declared lengths (it reads long strings in 64 KiB chunks and grows lists as
  items arrive), so the frame size bounds what it allocates; but a one-byte item such as an empty
  map becomes a ~64-byte Python object, so a 16 MiB frame of them would cost about 1 GiB.
  `max_items` caps that expansion.

`encode_frame` applies the same rules to what it sends, so a sender fails at once with the path to
the offending value instead of the peer dropping the connection.
"""

from __future__ import annotations

import struct
from typing import Final, NoReturn

import cbor2

PROTOCOL_VERSION: Final = 1
"""The version this node writes (unless told to write an older one for an older peer)."""

MIN_COMPATIBLE_VERSION: Final = 1
"""The oldest version this node can still read."""

DEFAULT_MAX_FRAME_SIZE: Final = 16 * 1024 * 1024
DEFAULT_MAX_ITEMS: Final = 1 << 20
DEFAULT_MAX_DEPTH: Final = 64

_PREFIX = struct.Struct(">I")
PREFIX_SIZE: Final = _PREFIX.size

# Bignums: cbor2 writes ints outside the 64-bit range as tag 2 / 3 around a byte string.
_ALLOWED_TAGS: Final = frozenset({2, 3})


class ProtocolError(ValueError):
    """The peer sent bytes that are not a valid frame; the connection should be closed."""


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


NEED_DATA: Final = _Sentinel("NEED_DATA")
"""`next_frame` needs more bytes before it can return a frame."""

CLOSED: Final = _Sentinel("CLOSED")
"""The peer closed the connection cleanly, between two frames; no more frames will come."""

Body = None | bool | int | float | str | bytes | list["Body"] | dict[str | bytes, "Body"]


# --------------------------------------------------------------------------------------------- encode


def encode_frame(
    body: object,
    *,
    version: int = PROTOCOL_VERSION,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> bytes:
    """One frame carrying `body`: None, bool, int, float, str, bytes, lists/tuples and dicts with
    str or bytes keys. Tuples arrive as lists and bytearrays as bytes.

    Raises ValueError (a TypeError would hide that the limits are part of the protocol) when the
    body holds another type, breaks a limit, or the frame would exceed `max_frame_size`.
    """
    if not MIN_COMPATIBLE_VERSION <= version <= PROTOCOL_VERSION:
        raise ValueError(
            f"cannot write protocol version {version}: "
            f"this node writes {MIN_COMPATIBLE_VERSION}..{PROTOCOL_VERSION}"
        )
    _check_encodable(body, max_items=max_items, max_depth=max_depth)
    payload = cbor2.dumps([version, body])
    if len(payload) > max_frame_size:
        raise ValueError(f"frame of {len(payload)} bytes exceeds the maximum frame size of {max_frame_size}")
    return _PREFIX.pack(len(payload)) + payload


def _check_encodable(body: object, *, max_items: int, max_depth: int) -> None:
    # Iterative so a deep body gives our error, not a RecursionError. The envelope array and the
    # version int count as 2 items and 1 level, exactly as the decoder will count them.
    items = 2
    stack: list[tuple[object, int, str]] = [(body, 2, "body")]
    while stack:
        value, depth, path = stack.pop()
        items += 1
        if items > max_items:
            raise ValueError(f"body has more than {max_items} items")
        if depth > max_depth:
            raise ValueError(f"{path} is nested deeper than {max_depth} levels")
        if value is None or isinstance(value, bool | int | float | str | bytes | bytearray):
            continue
        if isinstance(value, list | tuple):
            stack.extend((v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str | bytes):
                    raise ValueError(
                        f"{path} has a key of type {type(k).__name__}; keys must be str or bytes"
                    )
                items += 1  # the key
                stack.append((v, depth + 1, f"{path}[{k!r}]"))
        else:
            raise ValueError(
                f"cannot encode {type(value).__name__} at {path}: "
                "use None, bool, int, float, str, bytes, list or dict"
            )


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
    ) -> None:
        if not 0 < max_frame_size <= 0xFFFFFFFF:
            raise ValueError("max_frame_size must be in 1..2**32-1")
        self.max_frame_size = max_frame_size
        self.max_items = max_items
        self.max_depth = max_depth
        self.peer_version: int | None = None
        """The protocol version of the last frame decoded (None before the first)."""
        self._buffer = bytearray()
        self._payload_size: int | None = None  # set once the current frame's prefix has been read
        self._eof = False
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buffer)

    def receive_data(self, data: bytes) -> None:
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

    def next_frame(self) -> Body | _Sentinel:
        """The next frame's body, `NEED_DATA`, or `CLOSED`; raises `ProtocolError`."""
        if self._error is not None:
            raise self._error
        try:
            return self._next_frame()
        except ProtocolError as exc:
            self._error = exc
            self._buffer.clear()
            raise

    def _next_frame(self) -> Body | _Sentinel:
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
        _validate_cbor(payload, max_items=self.max_items, max_depth=self.max_depth)
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
        if version > PROTOCOL_VERSION:
            raise ProtocolError(
                f"unsupported protocol version {version}: this node reads "
                f"{MIN_COMPATIBLE_VERSION}..{PROTOCOL_VERSION} (upgrade it to talk to this peer)"
            )
        if version < MIN_COMPATIBLE_VERSION:
            raise ProtocolError(
                f"unsupported protocol version {version}: this node reads "
                f"{MIN_COMPATIBLE_VERSION}..{PROTOCOL_VERSION} (the peer is too old)"
            )
        self.peer_version = version
        return body


def _reject_tag(decoder: object, tag: cbor2.CBORTag) -> NoReturn:
    # Defence in depth: `_validate_cbor` has already refused every tag cbor2 would pass here.
    raise ProtocolError(f"unexpected CBOR tag {tag.tag}")


def _describe(value: object) -> str:
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    return type(value).__name__


# The validator: a walk over CBOR item headers (RFC 8949 §3) that builds no objects. Only
# well-formedness and our limits are checked here; UTF-8 validity is left to cbor2.

_INFO_SIZES: Final = {24: 1, 25: 2, 26: 4, 27: 8}
_SIMPLE_OK: Final = frozenset({20, 21, 22})  # false, true, null
_FLOAT_SIZES: Final = {25: 2, 26: 4, 27: 8}


def _validate_cbor(data: bytes, *, max_items: int, max_depth: int) -> None:
    end = len(data)
    pos = 0
    items = 0
    # One entry per open container: ([items still expected], keys seen so far or None for an
    # array). A map expects keys and values as separate items, so an even count means "a key next".
    stack: list[tuple[list[int], set[tuple[int, bytes]] | None]] = []

    start = 0

    def fail(why: str) -> NoReturn:
        raise ProtocolError(f"undecodable CBOR at byte {start}: {why}")

    while True:
        start = pos
        if pos >= end:
            fail("truncated item")
        initial = data[pos]
        major, info = initial >> 5, initial & 0x1F
        pos += 1
        if info < 24:
            arg = info
        elif info in _INFO_SIZES:
            size = _INFO_SIZES[info]
            if pos + size > end:
                fail("truncated item header")
            arg = int.from_bytes(data[pos : pos + size], "big")
            pos += size
        elif info == 31:
            fail("unexpected break byte" if major == 7 else "indefinite-length items are not allowed")
        else:
            fail(f"reserved additional information {info}")
        items += 1
        if items > max_items:
            fail(f"more than {max_items} items")
        # Depth of this item: the envelope is 1, the body 2 (as `_check_encodable` counts).
        if len(stack) + 1 > max_depth:
            fail(f"nested deeper than {max_depth} levels")

        expecting_key = bool(stack) and stack[-1][1] is not None and stack[-1][0][0] % 2 == 0
        if expecting_key and major not in (2, 3):
            fail("map keys must be text or byte strings")

        opened = False
        if major in (0, 1):
            pass
        elif major in (2, 3):
            if arg > end - pos:
                fail(f"string of {arg} bytes but only {end - pos} left in the frame")
            if expecting_key:
                keys = stack[-1][1]
                assert keys is not None
                key = (major, data[pos : pos + arg])
                if key in keys:
                    fail("duplicate map key")
                keys.add(key)
            pos += arg
        elif major in (4, 5):
            # Every item takes at least one byte, so a count beyond the bytes left is a lie.
            need = arg * (2 if major == 5 else 1)
            if need > end - pos:
                fail(f"container of {arg} entries but only {end - pos} bytes left in the frame")
            if need:
                stack.append(([need], set() if major == 5 else None))
                opened = True
        elif major == 6:
            if arg not in _ALLOWED_TAGS:
                fail(f"unexpected CBOR tag {arg}")
            # A bignum's content must be a byte string. The tag and its string count as one item
            # (as the encoder counts one int), and the string, read next, completes it.
            if pos >= end or data[pos] >> 5 != 2:
                fail(f"tag {arg} must wrap a byte string")
            items -= 1
            continue
        else:  # major 7: floats and simple values
            if not (info in _FLOAT_SIZES or (info < 24 and arg in _SIMPLE_OK)):
                fail(f"unexpected simple value (initial byte 0x{data[start]:02x})")

        if opened:
            continue
        # One item finished: close every container it completes.
        while stack:
            remaining = stack[-1][0]
            remaining[0] -= 1
            if remaining[0]:
                break
            stack.pop()
        if not stack:
            break
    if pos != end:
        fail(f"{end - pos} trailing bytes after the message")


__all__ = [
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
    "encode_frame",
]
