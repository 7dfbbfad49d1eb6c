"""Frame codec: round trips under any chunking, and a clear ProtocolError for every bad input."""

from __future__ import annotations

import contextlib
import struct

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bhandar_cli.node.net.cbor_validation import ProtocolError
from bhandar_cli.node.net.codec import CLOSED, NEED_DATA, PREFIX_SIZE, FrameDecoder, encode_frame
from bhandar_cli.node.net.wire_versions import MIN_COMPATIBLE_VERSION, PROTOCOL_VERSION

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
bodies = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(max_size=8) | st.binary(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


def raw_frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def drain(decoder: FrameDecoder) -> list[object]:
    out: list[object] = []
    while (frame := decoder.next_frame()) is not NEED_DATA and frame is not CLOSED:
        out.append(frame)
    return out


def decode_one(data: bytes, **limits: int) -> object:
    decoder = FrameDecoder(**limits)
    decoder.receive_data(data)
    return decoder.next_frame()


# ------------------------------------------------------------------------------------------ round trips


@given(bodies=st.lists(bodies, max_size=8))
def test_round_trip_fed_byte_by_byte(bodies: list[object]) -> None:
    stream = b"".join(encode_frame(b) for b in bodies)
    decoder = FrameDecoder()
    out: list[object] = []
    for i in range(len(stream)):
        decoder.receive_data(stream[i : i + 1])
        out.extend(drain(decoder))
    decoder.receive_data(b"")
    assert decoder.next_frame() is CLOSED
    assert out == bodies


@given(bodies=st.lists(bodies, max_size=8), data=st.data())
def test_round_trip_random_chunking(bodies: list[object], data: st.DataObject) -> None:
    stream = b"".join(encode_frame(b) for b in bodies)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    decoder = FrameDecoder()
    out: list[object] = []
    for lo, hi in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        if hi > lo:
            decoder.receive_data(stream[lo:hi])
        out.extend(drain(decoder))
    assert decoder.buffered == 0
    assert out == bodies


def test_tuples_and_bytearrays_arrive_as_lists_and_bytes() -> None:
    assert decode_one(encode_frame({"t": (1, bytearray(b"ab"))})) == {"t": [1, b"ab"]}


def test_frames_buffered_before_eof_are_still_delivered() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(encode_frame("a") + encode_frame("b"))
    decoder.receive_data(b"")
    assert [decoder.next_frame(), decoder.next_frame(), decoder.next_frame()] == ["a", "b", CLOSED]


def test_empty_stream_is_closed_cleanly() -> None:
    decoder = FrameDecoder()
    assert decoder.next_frame() is NEED_DATA
    decoder.receive_data(b"")
    assert decoder.next_frame() is CLOSED
    with pytest.raises(RuntimeError):
        decoder.receive_data(b"more")


# ------------------------------------------------------------------------------------------ frame size


def test_huge_length_prefix_rejected_as_soon_as_read() -> None:
    decoder = FrameDecoder(max_frame_size=1000)
    decoder.receive_data(b"\xff\xff")
    assert decoder.next_frame() is NEED_DATA
    decoder.receive_data(b"\xff\xff" + b"x" * 500)
    # Nothing of the oversized frame is kept, and further data is dropped too.
    assert decoder.buffered == 0
    decoder.receive_data(b"y" * 500)
    assert decoder.buffered == 0
    with pytest.raises(
        ProtocolError, match=r"frame length 4294967295 exceeds the maximum frame size of 1000"
    ):
        decoder.next_frame()
    # The decoder stays failed: the stream cannot be resynchronised.
    with pytest.raises(ProtocolError, match="exceeds the maximum frame size"):
        decoder.next_frame()


def test_default_maximum_is_16_mib() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(struct.pack(">I", 16 * 1024 * 1024 + 1))
    with pytest.raises(ProtocolError, match="exceeds the maximum frame size of 16777216"):
        decoder.next_frame()
    decoder = FrameDecoder()
    decoder.receive_data(struct.pack(">I", 16 * 1024 * 1024))
    assert decoder.next_frame() is NEED_DATA


def test_max_size_boundary() -> None:
    frame = encode_frame(b"x" * 100)
    size = len(frame) - PREFIX_SIZE
    assert decode_one(frame, max_frame_size=size) == b"x" * 100
    with pytest.raises(
        ProtocolError, match=f"frame length {size} exceeds the maximum frame size of {size - 1}"
    ):
        decode_one(frame, max_frame_size=size - 1)
    assert encode_frame(b"x" * 100, max_frame_size=size) == frame
    with pytest.raises(ValueError, match="exceeds the maximum frame size"):
        encode_frame(b"x" * 100, max_frame_size=size - 1)


# ------------------------------------------------------------------------------------------ truncation


def test_eof_in_the_middle_of_a_frame() -> None:
    frame = encode_frame("x" * 116, version=2)
    assert len(frame) == 124  # 4-byte prefix + 120-byte payload
    decoder = FrameDecoder()
    decoder.receive_data(frame[: 3 + PREFIX_SIZE])
    assert decoder.next_frame() is NEED_DATA
    decoder.receive_data(b"")
    with pytest.raises(ProtocolError, match=r"^connection closed mid-frame: 7 of 124 bytes$"):
        decoder.next_frame()


def test_eof_in_the_middle_of_a_length_prefix() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(encode_frame(1)[:3])
    decoder.receive_data(b"")
    with pytest.raises(ProtocolError, match=r"closed mid-frame: 3 of 4 length-prefix bytes"):
        decoder.next_frame()


@given(body=bodies, data=st.data())
def test_any_truncation_then_eof_is_an_error(body: object, data: st.DataObject) -> None:
    frame = encode_frame(body)
    cut = data.draw(st.integers(1, len(frame) - 1))
    decoder = FrameDecoder()
    decoder.receive_data(frame[:cut])
    assert decoder.next_frame() is NEED_DATA
    decoder.receive_data(b"")
    with pytest.raises(ProtocolError, match="connection closed mid-frame"):
        decoder.next_frame()


# ------------------------------------------------------------------------------------------ bad payloads


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "empty payload"),
        (b"\xfc", "reserved additional information"),
        (b"\xff", "unexpected break byte"),
        (b"\x82\x01\x18", "truncated item header"),
        (b"\x82\x82\x01\x01", "truncated item"),
        (b"\x82\x01", "container of 2 entries but only 1 bytes left"),
        (b"\x82\x01\x62\xff\xfe", "undecodable CBOR"),  # invalid UTF-8, caught by cbor2
        (b"\x82\x01\x02\x03", "1 trailing bytes"),
        (b"\x9f\x01\x02\xff", "indefinite-length items are not allowed"),
        (b"\x82\x01\xf7", "unexpected simple value"),  # undefined
        (b"\x82\x01\xf0", "unexpected simple value"),  # simple(16)
        (b"\x82\x01\xa1\x01\x02", "map keys must be text or byte strings"),
        (b"\x82\x01\xa1\x81\x01\x02", "map keys must be text or byte strings"),
        (b"\x82\x01\xa2\x61a\x01\x61a\x02", "duplicate map key"),
        (b"\x82\x01\xa2\x61a\x01\x78\x01a\x02", "duplicate map key"),  # same key, longer header
        (b"\x82\x01\xf9\x7e\x00", "NaN and infinite floats"),  # half-precision NaN
        (b"\x82\x01\xfa\xff\x80\x00\x00", "NaN and infinite floats"),  # single -infinity
        (b"\x82\x01\xfb\x7f\xf0\x00\x00\x00\x00\x00\x00", "NaN and infinite floats"),  # double inf
    ],
)
def test_garbage_payloads(payload: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_one(raw_frame(payload))


@given(garbage=st.binary(min_size=1, max_size=64))
def test_random_garbage_never_escapes_as_another_exception(garbage: bytes) -> None:
    decoder = FrameDecoder(max_frame_size=1 << 16)
    decoder.receive_data(garbage)
    decoder.receive_data(b"")
    # Either frames, then CLOSED, or a ProtocolError: never a cbor2 error, IndexError, etc.
    with contextlib.suppress(ProtocolError):
        drain(decoder)


@pytest.mark.parametrize(
    "header",
    [
        b"\x9a\xff\xff\xff\xff",  # array of 2**32 - 1 items
        b"\x9b" + b"\xff" * 8,  # array of 2**64 - 1 items
        b"\xba\xff\xff\xff\xff",  # map of 2**32 - 1 pairs
        b"\x5a\xff\xff\xff\xff",  # byte string of 4 GiB
        b"\x7b\x7f" + b"\xff" * 7,  # text string of 2**63 - 1 bytes
    ],
)
def test_declared_lengths_beyond_the_frame_are_rejected_before_decoding(header: bytes) -> None:
    with pytest.raises(ProtocolError, match="left in the frame"):
        decode_one(raw_frame(b"\x82\x01" + header + b"\x00" * 8))


def test_item_count_limit_bounds_expansion() -> None:
    # 1000 empty maps: 1 byte each on the wire, a whole dict each in memory.
    body: list[dict[str, object]] = [{}] * 1000
    assert decode_one(encode_frame(body), max_items=1003) == body
    with pytest.raises(ProtocolError, match="more than 1002 items"):
        decode_one(encode_frame(body), max_items=1002)
    with pytest.raises(ValueError, match="more than 1002 items"):
        encode_frame(body, max_items=1002)


def test_depth_limit() -> None:
    body: object = "leaf"
    for _ in range(10):
        body = [body]
    # The envelope is level 1, the body level 2, the string level 12.
    assert decode_one(encode_frame(body), max_depth=12) == body
    with pytest.raises(ProtocolError, match="nested deeper than 11 levels"):
        decode_one(encode_frame(body, max_depth=12), max_depth=11)
    with pytest.raises(ValueError, match="nested deeper than 11 levels"):
        encode_frame(body, max_depth=11)


@pytest.mark.parametrize(
    "tag",
    [
        0,  # datetime string
        1,  # epoch datetime
        28,  # shareable: lets a peer build shared and cyclic structures
        29,  # shared reference
        30,  # fraction
        35,  # regular expression: cbor2 would compile a peer-supplied pattern
        36,  # MIME message: cbor2 would run the email parser
        37,  # UUID
        256,  # string references
        258,  # set
        55799,  # self-described CBOR
        9999,  # unknown
    ],
)
def test_semantic_tags_are_rejected(tag: int) -> None:
    payload = cbor2.dumps([PROTOCOL_VERSION, cbor2.CBORTag(tag, "a")])
    with pytest.raises(ProtocolError, match=f"unexpected CBOR tag {tag}"):
        decode_one(raw_frame(payload))


def test_a_tag_past_the_validator_would_still_be_refused_by_the_decoder_hook() -> None:
    # Defence in depth, whichever way the installed cbor2 calls its tag hook.
    from bhandar_cli.node.net import codec

    with pytest.raises((ProtocolError, cbor2.CBORDecodeError)) as caught:
        cbor2.loads(cbor2.dumps(cbor2.CBORTag(9999, "a")), tag_hook=codec._reject_tag)
    error = caught.value if isinstance(caught.value, ProtocolError) else caught.value.__cause__
    assert isinstance(error, ProtocolError) and "unexpected CBOR tag 9999" in str(error)


def test_bignum_tags_must_wrap_byte_strings() -> None:
    assert decode_one(encode_frame([2**64, -(2**64) - 1])) == [2**64, -(2**64) - 1]
    payload = cbor2.dumps([PROTOCOL_VERSION, cbor2.CBORTag(2, [1, 2])])
    with pytest.raises(ProtocolError, match="tag 2 must wrap a byte string"):
        decode_one(raw_frame(payload))


# ------------------------------------------------------------------------------------------ envelope


@pytest.mark.parametrize(
    ("envelope", "message"),
    [
        ({"v": 1}, "expected \\[version, body\\], got dict"),
        ([1], "got an array of 1 items"),
        ([1, 2, 3], "got an array of 3 items"),
        ("hello", "got str"),
        (["1", "body"], "protocol version must be an integer, got str"),
        ([True, "body"], "protocol version must be an integer, got bool"),
    ],
)
def test_wrong_envelope(envelope: object, message: str) -> None:
    with pytest.raises(ProtocolError, match=f"wrong envelope: .*{message}"):
        decode_one(raw_frame(cbor2.dumps(envelope)))


def test_newer_version_is_rejected_with_a_clear_error() -> None:
    frame = raw_frame(cbor2.dumps([PROTOCOL_VERSION + 1, {"op": "get"}]))
    with pytest.raises(ProtocolError, match=f"unsupported protocol version {PROTOCOL_VERSION + 1}"):
        decode_one(frame)


def test_version_older_than_compatible_is_rejected() -> None:
    frame = raw_frame(cbor2.dumps([MIN_COMPATIBLE_VERSION - 1, {"op": "get"}]))
    with pytest.raises(ProtocolError, match="the peer is too old"):
        decode_one(frame)


@pytest.mark.parametrize("version", range(MIN_COMPATIBLE_VERSION, PROTOCOL_VERSION + 1))
def test_compatible_versions_are_accepted_and_remembered(version: int) -> None:
    decoder = FrameDecoder()
    assert decoder.peer_version is None
    decoder.receive_data(encode_frame({"op": "get"}, version=version))
    assert decoder.next_frame() == {"op": "get"}
    assert decoder.peer_version == version


def test_encoder_refuses_versions_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="cannot write protocol version"):
        encode_frame(1, version=PROTOCOL_VERSION + 1)


# ------------------------------------------------------------------------------------------ encoder


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({1: "x"}, r"body has a key of type int"),
        ({"a": [1, {2.5: 1}]}, r"body\['a'\]\[1\] has a key of type float"),
        ({"a": {1, 2}}, r"cannot encode set at body\['a'\]"),
        ([object()], r"cannot encode object at body\[0\]"),
        (memoryview(b"x"), "cannot encode memoryview"),
        ({"ts": [float("nan")]}, r"body\['ts'\]\[0\] is nan: NaN and infinite floats"),
    ],
)
def test_encoder_names_the_offending_value(body: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode_frame(body)


def _accepts(fn: object) -> bool:
    try:
        fn()  # type: ignore[operator]
    except ValueError:
        return False
    return True


@given(body=bodies, max_items=st.integers(1, 40), max_depth=st.integers(1, 8))
def test_encoder_and_decoder_count_items_and_depth_alike(
    body: object, max_items: int, max_depth: int
) -> None:
    # A sender must never produce a frame its peer (with the same limits) refuses, nor refuse one
    # the peer would accept.
    frame = encode_frame(body)
    sends = _accepts(lambda: encode_frame(body, max_items=max_items, max_depth=max_depth))
    receives = _accepts(lambda: decode_one(frame, max_items=max_items, max_depth=max_depth))
    assert sends == receives
