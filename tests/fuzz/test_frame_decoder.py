"""Fuzz the frame decoder (node/net/codec.py, node/net/cbor_validation.py) and `core/wire.from_wire`.

Whatever bytes a peer sends, in whatever chunks, the decoder returns bodies of the allowed types
or raises `ProtocolError`, and never buffers more than one frame; `from_wire` returns a message or
raises `ValueError`. Any other exception, or a frame that decodes to more objects than the item
limit allows, fails the test.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from bhandar_cli.core.wire import from_wire, to_wire
from bhandar_cli.node.net.cbor_validation import ProtocolError
from bhandar_cli.node.net.codec import (
    CLOSED,
    NEED_DATA,
    PREFIX_SIZE,
    Body,
    FrameDecoder,
    Sentinel,
    encode_frame,
)

from .conftest import fuzz_settings
from .strategies import bodies, mutated, records, wire_messages

SMALL_FRAME = 4096
SMALL_ITEMS = 256
SMALL_DEPTH = 16


def items_in(body: object) -> int:
    """Data items in a decoded body, counted as the validator counts them (keys too)."""
    count, stack = 0, [body]
    while stack:
        value = stack.pop()
        count += 1
        if isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, dict):
            count += len(value)
            stack.extend(value.values())
    return count


def assert_plain(body: object, depth: int = 0) -> None:
    """Only the types a frame body may hold, nested no deeper than the limit."""
    assert depth <= SMALL_DEPTH
    if isinstance(body, list):
        for v in body:
            assert_plain(v, depth + 1)
    elif isinstance(body, dict):
        for k, v in body.items():
            assert isinstance(k, str | bytes)
            assert_plain(v, depth + 1)
    else:
        assert body is None or isinstance(body, bool | int | float | str | bytes), type(body)


def feed(chunks: list[bytes]) -> list[Body]:
    """Feed the chunks to a small-limit decoder, pulling frames after each; then end the stream.
    Returns the frames, or raises the decoder's ProtocolError."""
    decoder = FrameDecoder(max_frame_size=SMALL_FRAME, max_items=SMALL_ITEMS, max_depth=SMALL_DEPTH)
    frames: list[Body] = []
    for chunk in [*chunks, b""]:
        decoder.receive_data(chunk)
        while (frame := decoder.next_frame()) is not NEED_DATA and frame is not CLOSED:
            assert not isinstance(frame, Sentinel)
            frames.append(frame)
        # Memory stays bounded: what is left is less than one whole frame.
        assert decoder.buffered < PREFIX_SIZE + SMALL_FRAME
    return frames


def check_stream(chunks: list[bytes]) -> None:
    try:
        frames = feed(chunks)
    except ProtocolError as exc:
        assert str(exc), "a ProtocolError must say what was wrong"
        return
    for frame in frames:
        assert items_in(frame) <= SMALL_ITEMS
        assert_plain(frame, depth=2)  # the envelope and the body are the first two levels


@st.composite
def split(draw: st.DrawFn, data: bytes) -> list[bytes]:
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    # No empty chunk: b"" is how a transport says the peer closed its side.
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if a < b]


@fuzz_settings()
@given(data=st.data(), raw=st.binary(max_size=600))
@example(data=None, raw=b"\x00\x00\x00\x02\xff\xff")
def test_arbitrary_bytes_in_arbitrary_chunks(data: st.DataObject | None, raw: bytes) -> None:
    check_stream([raw] if data is None else data.draw(split(raw)))


@fuzz_settings()
@given(data=st.data(), frames=st.lists(bodies, min_size=1, max_size=4))
def test_valid_frames_with_mutated_bytes(data: st.DataObject, frames: list[object]) -> None:
    stream = b"".join(encode_frame(f) for f in frames)
    check_stream(data.draw(split(data.draw(mutated(stream)))))


def nested(depth: int, opener: bytes) -> bytes:
    """A CBOR item nested `depth` containers deep: arrays of one, or maps of one text key."""
    return opener * depth + b"\x00"


@fuzz_settings(0.25)
@given(depth=st.integers(0, 5000), opener=st.sampled_from([b"\x81", b"\xa1\x61k", b"\x9f", b"\xc2"]))
@example(depth=SMALL_DEPTH, opener=b"\x81").via("the deepest array allowed")
@example(depth=SMALL_DEPTH + 1, opener=b"\x81").via("one too deep")
def test_deep_nesting_is_refused_by_a_protocol_error(depth: int, opener: bytes) -> None:
    payload = b"\x82\x01" + nested(depth, opener)
    frame = struct.pack(">I", len(payload)) + payload
    if len(frame) > SMALL_FRAME + PREFIX_SIZE or (opener in (b"\x9f", b"\xc2") and depth):
        with pytest.raises(ProtocolError):
            feed([frame])
        return
    allowed = depth + 2 <= SMALL_DEPTH  # the envelope and the body take two levels
    if allowed:
        assert len(feed([frame])) == 1
    else:
        with pytest.raises(ProtocolError, match="deeper"):
            feed([frame])


# Heads of items declaring 2^32 .. 2^64-1 bytes or entries: strings, arrays, maps, bignums.
huge_heads = st.builds(
    lambda major, size: bytes([major << 5 | 27]) + size.to_bytes(8, "big"),
    st.sampled_from([2, 3, 4, 5]),
    st.integers(2**32, 2**64 - 1),
)


@fuzz_settings()
@given(head=huge_heads, tail=st.binary(max_size=32), prefix=st.integers(0, 2**32 - 1), tagged=st.booleans())
def test_huge_declared_lengths_are_refused_without_allocating(
    head: bytes, tail: bytes, prefix: int, tagged: bool
) -> None:
    payload = b"\x82\x01" + (b"\xc2" if tagged else b"") + head + tail
    # The honest prefix: the item's own declared length is the lie.
    with pytest.raises(ProtocolError):
        feed([struct.pack(">I", len(payload)) + payload])
    # A lying prefix: refused as soon as it is read when over the limit, else at end of stream.
    with pytest.raises(ProtocolError):
        feed([struct.pack(">I", prefix) + payload[: max(prefix - 1, 0)]])


@fuzz_settings()
@given(body=wire_messages | records | bodies)
@example(body={"$r": ["v", [["a", 1, {}, 2**62, "", 0.0]]]}).via("a value of 2^62 zero bytes")
@example(body={"$r": ["v", [["a", 1, {}, 10**9, "", 0.0]]]}).via("a value of a gigabyte of zeros")
@example(body={"$t": "PutRequest", "value": {"$r": ["v", []]}})
@example(body={"$t": "KeyspaceDef", "name": "k", "policy": None, "n": 3, "quorum": "sloppy"}).via(
    "KeyspaceDef's own check raised BadInput, not the ValueError from_wire promises"
)
def test_from_wire_returns_a_message_or_raises_value_error(body: object) -> None:
    frame = encode_frame(body)  # what a peer could send, then what the node's decoder hands on
    decoder = FrameDecoder()
    decoder.receive_data(frame)
    decoded = decoder.next_frame()
    try:
        message = from_wire(decoded)
    except ValueError as exc:
        assert str(exc)
        return
    # Whatever came through is plain data again (nothing a frame cannot carry, no huge bytes).
    again = to_wire(message)
    assert len(encode_frame(again)) <= 64 * len(frame) + 1024
