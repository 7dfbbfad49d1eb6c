"""Protocol versions: negotiation in the codec, a process limited to version 1, what each version
carries (core/wire.py ADDED_IN), protocol 2's round-trip times and goodbyes in gossip, and
protocol 3's batches (several messages in one frame)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from random import Random

import cbor2
import pytest

from bhandar_cli.core.membership.authorship import Removal
from bhandar_cli.core.membership.gossip import Goodbye, GossipAck, GossipLiveness, GossipSyn
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.model.access_tokens import TokenRecord
from bhandar_cli.core.protocol.messages import Send
from bhandar_cli.core.wire import from_wire, readable_at, to_wire, to_wire_at
from bhandar_cli.node.net import codec
from bhandar_cli.node.net.cbor_validation import ProtocolError
from bhandar_cli.node.net.codec import (
    FrameDecoder,
    encode_body,
    encode_frame,
    frame_of_bodies,
    limit_protocol,
    negotiate,
)
from bhandar_cli.node.net.frames import wire_frame
from bhandar_cli.node.net.wire_versions import MIN_COMPATIBLE_VERSION, PROTOCOL_VERSION


@pytest.fixture
def as_version_1() -> Iterator[None]:
    """This process as a node run with --protocol 1, for the test only."""
    limit_protocol(1)
    try:
        yield
    finally:
        limit_protocol(PROTOCOL_VERSION)


def frame_at(version: int, body: object) -> bytes:
    payload = cbor2.dumps([version, body])
    return len(payload).to_bytes(4, "big") + payload


def decode(data: bytes, **kwargs: int) -> object:
    decoder = FrameDecoder(**kwargs)
    decoder.receive_data(data)
    return decoder.next_frame()


def test_this_build_reads_versions_1_to_6() -> None:
    assert (MIN_COMPATIBLE_VERSION, PROTOCOL_VERSION) == (1, 6)


@pytest.mark.parametrize(
    ("mine", "theirs", "agreed"),
    [
        (2, None, 1),  # not heard yet, or a hello without "protocol" (a version-1 build): the oldest
        (2, 1, 1),
        (2, 2, 2),
        (1, 2, 1),  # a node limited to 1 writes 1 to a newer peer
        (2, 3, 2),  # a newer peer reads ours
        (3, 2, 2),  # a version-2 peer in a rolling upgrade: one message per frame
        (3, None, 1),
        (3, 3, 3),
        (3, 4, 3),
    ],
)
def test_negotiate_takes_the_newest_version_both_read(mine: int, theirs: int | None, agreed: int) -> None:
    assert negotiate(mine, theirs) == agreed


@pytest.mark.parametrize("theirs", ["2", True, 0, -1, 1.5, [2]])
def test_negotiate_refuses_a_hello_whose_version_is_not_a_version(theirs: object) -> None:
    with pytest.raises(ProtocolError, match="not a protocol version"):
        negotiate(2, theirs)


def test_a_version_6_process_reads_all_six_and_writes_6_by_default() -> None:
    assert codec.protocol() == 6
    assert decode(frame_at(1, {"a": 1})) == {"a": 1}
    assert decode(frame_at(2, {"a": 1})) == {"a": 1}
    assert decode(frame_at(3, [{"a": 1}])) == {"a": 1}  # a batch of one
    assert decode(frame_at(4, [{"a": 1}])) == {"a": 1}
    assert decode(frame_at(5, [{"a": 1}])) == {"a": 1}
    assert decode(frame_at(6, [{"a": 1}])) == {"a": 1}
    assert encode_frame({"a": 1}) == frame_at(6, [{"a": 1}])
    assert encode_frame({"a": 1}, version=1) == frame_at(1, {"a": 1})
    assert encode_frame({"a": 1}, version=2) == frame_at(2, {"a": 1})
    assert wire_frame({"a": 1}, 1) == frame_at(1, {"a": 1})
    assert wire_frame({"a": 1}, 2) == frame_at(2, {"a": 1})
    assert wire_frame({"a": 1}, 3) == frame_at(3, [{"a": 1}])
    assert wire_frame({"a": 1}, 4) == frame_at(4, [{"a": 1}])
    assert wire_frame({"a": 1}) == frame_at(6, [{"a": 1}])


def test_a_batch_is_several_messages_in_one_frame_read_one_at_a_time() -> None:
    bodies = [{"a": 1}, [1, 2], "three"]
    frame = frame_of_bodies(3, [encode_body(b) for b in bodies])
    assert frame == frame_at(3, bodies)  # the same bytes cbor2 writes for the whole
    decoder = FrameDecoder()
    decoder.receive_data(frame + frame_at(2, {"b": 2}))
    assert [decoder.next_frame() for _ in range(4)] == [*bodies, {"b": 2}]
    assert decoder.next_frame() is codec.NEED_DATA
    # Before version 3 a frame holds one message, so a list there is one message, not a batch.
    assert decode(frame_at(2, [1, 2])) == [1, 2]
    with pytest.raises(ValueError, match="one message per frame"):
        frame_of_bodies(2, [encode_body(1), encode_body(2)])
    assert frame_of_bodies(2, [encode_body({"a": 1})]) == frame_at(2, {"a": 1})


@pytest.mark.parametrize("count", [1, 23, 24, 255, 256, 70000])
def test_a_batch_of_any_size_has_cbors_own_array_head(count: int) -> None:
    bodies = [encode_body(i % 7) for i in range(count)]
    assert frame_of_bodies(3, bodies) == frame_at(3, [i % 7 for i in range(count)])


@pytest.mark.parametrize("body", [{"a": 1}, [], "x", 7])
def test_a_version_3_frame_that_is_not_a_batch_is_refused(body: object) -> None:
    with pytest.raises(ProtocolError, match="a version 3 frame carries an array of messages"):
        decode(frame_at(3, body))


def test_a_batch_counts_against_neither_limit() -> None:
    """A message at the depth and item limits alone is read in a batch too, and one past them is
    refused in either, naming the same limits."""
    deep: object = "leaf"
    for _ in range(9):
        deep = [deep]  # envelope 1, body 2, the string 11
    assert decode(frame_at(2, deep), max_depth=11) == deep
    assert decode(frame_at(3, [deep]), max_depth=11) == deep
    with pytest.raises(ProtocolError, match="nested deeper than 10 levels"):
        decode(frame_at(3, [deep]), max_depth=10)
    flat = [0] * 10  # 2 envelope items + 11
    assert decode(frame_at(3, [flat]), max_items=13) == flat
    with pytest.raises(ProtocolError, match="more than 12 items"):
        decode(frame_at(3, [flat]), max_items=12)


def test_the_batch_and_the_encoder_check_agree_on_limits() -> None:
    body: object = [[["x"]]]
    for version in (2, 3):
        assert decode(encode_frame(body, version=version, max_depth=5), max_depth=5) == body


def test_a_decoder_told_the_peer_reads_only_1_refuses_2() -> None:
    with pytest.raises(ProtocolError, match=r"unsupported protocol version 2: this node reads 1\.\.1"):
        decode(frame_at(2, {}), max_version=1)


def test_a_process_limited_to_1_reads_and_writes_only_1(as_version_1: None) -> None:
    assert codec.protocol() == 1
    assert encode_frame({"a": 1}) == frame_at(1, {"a": 1})
    assert wire_frame({"a": 1}) == frame_at(1, {"a": 1})
    with pytest.raises(ValueError, match="cannot write protocol version 2"):
        encode_frame({"a": 1}, version=2)
    assert decode(frame_at(1, [1])) == [1]
    with pytest.raises(ProtocolError, match="unsupported protocol version 2"):
        decode(frame_at(2, [1]))
    assert negotiate(codec.protocol(), 2) == 1


def test_limit_protocol_refuses_a_version_this_build_does_not_speak() -> None:
    for version in (0, PROTOCOL_VERSION + 1):
        with pytest.raises(ValueError, match="not one this build speaks"):
            limit_protocol(version)
    assert codec.protocol() == PROTOCOL_VERSION


def member(name: str, generation: int = 1) -> MemberState:
    return MemberState(name, "z1", (ord(name),), generation=generation, heartbeat=1)


def test_version_1_frames_leave_out_what_version_2_added() -> None:
    syn = GossipSyn((member("A"),), (), 0, 12.5)
    ack = GossipAck((member("A"),), (), 0, (), 12.5)
    assert to_wire_at(syn, 2)["sent"] == to_wire(syn)["sent"] == 12.5
    assert "sent" not in to_wire_at(syn, 1) and "echo" not in to_wire_at(ack, 1)
    # What a version-2 reader makes of a version-1 syn: the field's default.
    assert from_wire(to_wire_at(syn, 1)) == GossipSyn((member("A"),), (), 0, None)
    assert readable_at(Goodbye(1), 2) and not readable_at(Goodbye(1), 1)
    assert readable_at(syn, 1)


def test_version_4_frames_leave_out_seals_and_removals_at_any_depth() -> None:
    sealed = replace(member("A"), cert=b"der", seal=b"sig")
    record = TokenRecord("0123abcd", "0" * 64, (("*", "read"),), seal="ab")
    syn = GossipSyn((sealed,), (), 0, 1.0, (Removal("F", 2.0, b"sig"),))
    ack = GossipAck((sealed,), (), 0, (record,), 1.0)
    assert to_wire_at(syn, 5) == to_wire(syn)
    old_syn, old_ack = to_wire_at(syn, 4), to_wire_at(ack, 4)
    assert "removals" not in old_syn and old_syn["sent"] == 1.0
    assert {"cert", "seal"}.isdisjoint(old_syn["members"][0]) and old_syn["members"][0]["id"] == "A"
    assert "seal" not in old_ack["client_tokens"][0] and old_ack["client_tokens"][0]["id"] == "0123abcd"
    # What a version-5 reader makes of them: unsealed, no removals.
    assert from_wire(old_syn) == GossipSyn((member("A"),), (), 0, 1.0)


def pair() -> tuple[GossipLiveness, GossipLiveness]:
    a = GossipLiveness(member("A"), [member("B")], [], 0.0, Random(1))
    b = GossipLiveness(member("B"), [member("A")], [], 0.0, Random(2))
    return a, b


def test_an_ack_gives_the_syn_time_back_so_a_version_2_node_knows_its_round_trip() -> None:
    a, b = pair()
    syn = GossipSyn(a.digest(), (), 0, 10.0)
    (reply,) = [e for e in b.handle(10.01, "A", syn) or [] if isinstance(e, Send)]
    assert isinstance(reply.msg, GossipAck) and reply.msg.echo == 10.0
    a.handle(10.03, "B", reply.msg)
    row = next(r for r in a.view(10.03) if r["id"] == "B")
    assert row["rtt_ms"] == pytest.approx(30.0)
    # A version-1 ack (no echo) measures nothing.
    a2, _ = pair()
    a2.handle(10.03, "B", GossipAck(b.digest()))
    assert next(r for r in a2.view(10.03) if r["id"] == "B")["rtt_ms"] is None


def test_a_goodbye_is_down_at_once_and_the_next_life_is_up() -> None:
    a, b = pair()
    a.handle(0.1, "B", GossipSyn(b.digest()))  # A has seen B up (a note needs a change)
    assert a.is_up("B", 0.1)
    farewell = b.goodbye()
    assert farewell == Goodbye(1)
    notes = a.handle(0.2, "B", farewell)
    assert not a.is_up("B", 0.2)
    assert any("sees B down" in getattr(n, "text", "") for n in notes or [])
    # A goodbye of an older life than the one known changes nothing.
    a3, _ = pair()
    a3.membership.merge(member("B", generation=5))
    a3.handle(0.2, "B", Goodbye(4))
    assert a3.is_up("B", 0.2)
    # B restarts: a later generation is up again.
    a.handle(0.5, "B", GossipSyn((member("B", generation=2),)))
    assert a.is_up("B", 0.5)
