"""The TCP transport in one process: delivery, partitions, delays, a peer down, reconnection."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.core.membership.gossip import GossipSyn
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.core.protocol.client_messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    PutRequest,
    PutResult,
)
from bhandar_cli.core.protocol.messages import (
    ClientReply,
    Ping,
    ReplicaAck,
    ReplicaRead,
    ReplicaReadReply,
    ReplicaWrite,
    SchemaUpdate,
)
from bhandar_cli.core.wire import from_wire, to_wire
from bhandar_cli.fleet.placement import free_ports
from bhandar_cli.node.net.blocking_rpc import RpcError
from bhandar_cli.node.net.codec import NEED_DATA, FrameDecoder, encode_frame
from bhandar_cli.node.net.frames import PEER_QUEUE, FrameConn, checked_body, wire_frame
from bhandar_cli.node.net.rpc import open_rpc
from bhandar_cli.node.net.transport import TcpTransport
from bhandar_cli.node.net.wire_versions import PROTOCOL_VERSION

RECORD = Versioned((Sibling(("A", 3), {"A": 3, "B~2": 1}, b'"x"', "application/json", 1.5),))
KS = KeyspaceDef("kv", "lww", 3, "strict")
SAMPLES: list[Any] = [
    PutRequest(1, "kv", "k", b"\x00\xff", "application/octet-stream", {"A": 2}, "ALL", True, 1),
    PutRequest(2, "kv", "k", None, "", None),
    GetRequest(3, "kv", "k"),
    IncrRequest(4, "counters", "c", -5, "req-1"),
    ReplicaWrite(5, KS, "k", RECORD, "D", "handoff"),
    ReplicaAck(6, False, "full"),
    ReplicaRead(7, KS, "k"),
    ReplicaReadReply(8, RECORD),
    ReplicaReadReply(9, None),
    SchemaUpdate((KS, KeyspaceDef("counters", "counter"))),
    ClientReply(10, PutResult("A", 2, 2, ("w",), ("E for D",), ((0.5, "step"),))),
    ClientReply(11, Failure("timeout", "slow", 1, 2, "A")),
    GetResult("B", RECORD, 2, 2),
    GossipSyn((MemberState("A", "z1", (1, 2), "normal", 3, 7, "127.0.0.1:1", "127.0.0.1:2"),)),
]


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_wire_frame_is_exactly_the_codec_frame(msg: Any) -> None:
    body = to_wire(msg)
    assert wire_frame(body) == encode_frame(body)
    decoder = FrameDecoder()
    decoder.receive_data(wire_frame(body))
    assert from_wire(decoder.next_frame()) == msg


class Peer:
    """A transport with an inbox, serving on a port of its own."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.inbox: list[tuple[str, Any, float]] = []
        self.arrived = trio.Event()
        self.book: dict[str, str] = {}  # where peers listen, as a node's membership would say
        self.transport = TcpTransport(name, self._on_message, self._no_clients, resolve=self._resolve)
        self.port = 0

    def _resolve(self, dst: str) -> str:
        return self.book.get(dst, "")

    def _on_message(self, src: str, msg: Any) -> None:
        self.inbox.append((src, msg, trio.current_time()))
        self.arrived.set()

    async def _no_clients(self, conn: FrameConn, hello: dict[str, Any], admit: Callable[[], None]) -> None:
        return None

    async def next(self, timeout: float = 5.0) -> tuple[str, Any, float]:
        with trio.fail_after(timeout):
            while not self.inbox:
                self.arrived = trio.Event()
                await self.arrived.wait()
        return self.inbox.pop(0)


async def pair(nursery: trio.Nursery, port_b: int = 0) -> tuple[Peer, Peer, trio.CancelScope]:
    a, b = Peer("A"), Peer("B")
    a.port = await nursery.start(a.transport.serve, "127.0.0.1", 0)
    scope_b = trio.CancelScope()

    async def serve_b(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        with scope_b:
            await b.transport.serve("127.0.0.1", port_b, task_status=task_status)

    b.port = await nursery.start(serve_b)
    a.book["B"] = f"127.0.0.1:{b.port}"
    b.book["A"] = f"127.0.0.1:{a.port}"
    return a, b, scope_b


def test_messages_flow_both_ways_in_order() -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            a, b, _ = await pair(nursery)
            for i in range(50):
                a.transport.send("A", "B", Ping(i))
            got = [await b.next() for _ in range(50)]
            assert [(src, msg.seq) for src, msg, _ in got] == [("A", i) for i in range(50)]
            b.transport.send("B", "A", ReplicaAck(9))
            assert (await a.next())[:2] == ("B", ReplicaAck(9))
            assert a.transport.connected() == ["B"]
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_messages_queued_for_a_peer_in_one_burst_leave_in_one_write() -> None:
    """The first message wakes the link's writer; one queued by a task woken alongside it (trio
    runs them in either order) still joins the same write."""

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            a, b, _ = await pair(nursery)
            a.transport.send("A", "B", Ping(0))
            await b.next()  # connected
            writes = a.transport.stats["writes"]
            for i in range(1, 11):
                woken = trio.Event()

                async def second(woken: trio.Event = woken, seq: int = 2 * i) -> None:
                    await woken.wait()
                    a.transport.send("A", "B", Ping(seq))

                nursery.start_soon(second)
                await trio.testing.wait_all_tasks_blocked()
                a.transport.send("A", "B", Ping(2 * i - 1))
                woken.set()
                got = [(await b.next())[1].seq for _ in range(2)]
                assert got == [2 * i - 1, 2 * i]
            assert a.transport.stats["writes"] - writes == 10  # two frames per write
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_a_message_fanned_out_as_equal_objects_is_encoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    encoded: list[Any] = []

    def counting_body(body: Any) -> bytes:
        encoded.append(body)
        return checked_body(body)

    monkeypatch.setattr("bhandar_cli.node.net.transport.checked_body", counting_body)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            a, b, _ = await pair(nursery)
            b.transport.send("B", "A", Ping(0))  # B's hello tells A what B reads
            await a.next()
            a.book["C"] = a.book["B"]  # a second destination (B's port serves it)
            a.transport.peer_protocols["C"] = a.transport.peer_protocols["B"]  # C is B
            encoded.clear()
            write = ReplicaWrite(7, KS, "k", RECORD)
            a.transport.send("A", "B", write)
            a.transport.send("A", "C", ReplicaWrite(7, KS, "k", RECORD))  # equal, not the same
            a.transport.send("A", "B", ReplicaWrite(8, KS, "k", RECORD))  # another op: its own
            got = [(await b.next())[1] for _ in range(3)]
            assert sorted(m.op for m in got) == [7, 7, 8]
            assert [body["op"] for body in encoded] == [7, 8]
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_messages_sent_together_travel_in_one_frame_and_arrive_each_in_order() -> None:
    """Protocol 3: what a node sends a peer at one moment is one frame (validated and decoded
    once); each message still reaches the node, in order."""

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            a, b, _ = await pair(nursery)
            b.transport.send("B", "A", Ping(0))  # B's hello tells A what B reads
            await a.next()
            a.transport.send("A", "B", Ping(0))
            await b.next()
            assert a.transport.version_for("B") == PROTOCOL_VERSION
            sent, frames = a.transport.stats["sent"], a.transport.stats["frames"]
            messages = [Ping(1), ReplicaWrite(7, KS, "k", RECORD), ReplicaAck(7), Ping(2)]
            for msg in messages:
                a.transport.send("A", "B", msg)
            assert [(await b.next())[1] for _ in messages] == messages
            assert a.transport.stats["sent"] - sent == 4
            assert a.transport.stats["frames"] - frames == 1
            nursery.cancel_scope.cancel()

    trio.run(main)


@pytest.mark.parametrize("old", [1, 2])
def test_a_node_of_protocol_3_and_an_older_one_talk_a_frame_per_message(old: int) -> None:
    """A rolling upgrade: to a peer that reads only version 1 or 2 a node writes each message in a
    frame of its own, in that version, and reads the peer's; between two version-3 nodes, batches."""

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            a, b, _ = await pair(nursery)
            b.transport.protocol = old  # B as an older build: its hello says so
            b.transport.send("B", "A", Ping(0))
            await a.next()
            assert a.transport.version_for("B") == old
            frames = a.transport.stats["frames"]
            for i in range(1, 4):
                a.transport.send("A", "B", Ping(i))
            assert [(await b.next())[1] for _ in range(3)] == [Ping(1), Ping(2), Ping(3)]
            assert a.transport.stats["frames"] - frames == 3
            assert ("sent", old, "Ping") in a.transport.by_protocol
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_a_put_forwarded_before_the_peers_hello_keeps_its_dot() -> None:
    """A node that has not heard a peer's hello yet (it just started or joined) holds what it
    sends until the hello says what the peer reads. Written at once in the oldest version, a
    forwarded put lost its exact dot, and the coordinator applied it under a second dot: a
    fallback coordinator then stored the same write again under the first, two siblings of one
    put (`bhandar soak --seconds 24 --seed 3`: a false sibling after a join)."""
    forwarded = PutRequest(1, "kv", "k", b'"v"', "application/json", {"A": 2}, dot=("F~x", 1), ts=2.5)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            a, b, _ = await pair(nursery)
            assert "B" not in a.transport.peer_protocols
            a.transport.send("A", "B", forwarded)
            assert (await b.next())[1] == forwarded
            assert ("sent", PROTOCOL_VERSION, "PutRequest") in a.transport.by_protocol
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_a_peer_that_never_says_hello_is_written_to_in_the_oldest_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A peer whose own link never comes (an old build that has nothing to send, a listener
    that is not a node) still gets what is sent, after HELLO_WAIT, in the oldest version."""
    monkeypatch.setattr("bhandar_cli.node.net.transport.HELLO_WAIT", 0.05)

    async def main() -> None:
        frames: list[Any] = []
        got = trio.Event()

        async def silent(stream: trio.SocketStream) -> None:
            decoder = FrameDecoder()
            async for data in stream:  # the hello, then the message: never a hello of its own
                decoder.receive_data(data)
                while (frame := decoder.next_frame()) is not NEED_DATA:
                    frames.append(frame)
                if len(frames) >= 2:
                    break
            got.set()

        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            a = Peer("A")
            await nursery.start(a.transport.serve, "127.0.0.1", 0)
            a.book["B"] = f"127.0.0.1:{port}"
            a.transport.send("A", "B", Ping(4))
            with trio.fail_after(60):  # a deadline for a loaded machine, not a timing
                await got.wait()
            assert frames[0]["hello"] == "peer"
            assert from_wire(frames[1]) == Ping(4)
            assert ("sent", 1, "Ping") in a.transport.by_protocol
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_partition_drops_on_both_sides_and_heal_restores() -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            a, b, _ = await pair(nursery)
            a.transport.send("A", "B", Ping(0))
            await b.next()
            a.transport.model.cut("A", "B")  # A's side: dropped when sent
            a.transport.send("A", "B", Ping(1))
            b.transport.model.cut("A", "B")  # B's side: dropped when received
            a.transport.model.heal()
            a.transport.send("A", "B", Ping(2))
            with trio.move_on_after(0.3):
                await b.next()
                raise AssertionError("a message crossed the partition")
            assert a.transport.stats["dropped"] >= 1 and b.transport.stats["dropped"] >= 1
            b.transport.model.heal()
            a.transport.send("A", "B", Ping(3))
            assert (await b.next())[1] == Ping(3)
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_delay_holds_messages_back() -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            a, b, _ = await pair(nursery)
            a.transport.model.set_delay("B", 0.2)
            sent = trio.current_time()
            a.transport.send("A", "B", Ping(1))
            _, _, arrived = await b.next()
            assert arrived - sent >= 0.2
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_a_peer_down_never_blocks_the_sender_and_queues_are_bounded() -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            a = Peer("A")
            await nursery.start(a.transport.serve, "127.0.0.1", 0)
            (dead_port,) = free_ports(1)  # nothing listens there
            a.book["B"] = f"127.0.0.1:{dead_port}"
            started = trio.current_time()
            for i in range(PEER_QUEUE * 3):
                a.transport.send("A", "B", Ping(i))  # synchronous: it cannot block
            assert trio.current_time() - started < 1.0
            assert a.transport.stats["dropped"] >= PEER_QUEUE * 2 - 1
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_reconnects_after_the_peer_restarts() -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            a, b, scope_b = await pair(nursery)
            a.transport.send("A", "B", Ping(1))
            await b.next()
            scope_b.cancel()  # B goes away with its listener and connections
            port = b.port
            await trio.sleep(0.05)
            b2 = Peer("B")
            await nursery.start(b2.transport.serve, "127.0.0.1", port)
            with trio.fail_after(10):
                seq = 2
                while not b2.inbox:  # the first sends may die with the old connection
                    a.transport.send("A", "B", Ping(seq))
                    seq += 1
                    await trio.sleep(0.05)
            assert b2.inbox[0][0] == "A"
            assert a.transport.stats["connects"] >= 2
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_a_peer_that_moved_is_reached_at_its_new_address() -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            a, b, scope_b = await pair(nursery)
            a.transport.send("A", "B", Ping(1))
            await b.next()
            scope_b.cancel()  # B goes away, and comes back listening on another port
            b2 = Peer("B")
            port = await nursery.start(b2.transport.serve, "127.0.0.1", 0)
            assert port != b.port
            a.book["B"] = f"127.0.0.1:{port}"  # membership learned B's new address
            with trio.fail_after(10):
                seq = 2
                while not b2.inbox:
                    a.transport.send("A", "B", Ping(seq))
                    seq += 1
                    await trio.sleep(0.05)
            assert b2.inbox[0][0] == "A"
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_rpc_to_nowhere_is_an_unreachable_error() -> None:
    (port,) = free_ports(1)

    async def main() -> None:
        with pytest.raises(RpcError) as info:
            async with open_rpc("127.0.0.1", port, "Z"):
                pass
        assert info.value.kind == "unreachable"
        assert "Z" in str(info.value)

    trio.run(main)


def test_a_transport_that_stops_listening_refuses_new_clients_and_still_answers_connected_ones() -> None:
    """A stopping node closes its listener before its connections (node/process.py `stop`): a
    client that connects then is refused, which it knows was not run; one that connected before
    still gets its request answered ("shutting down", not run), not cut after sending it."""

    async def stopping(conn: FrameConn, hello: dict[str, Any], admit: Callable[[], None]) -> None:
        while (body := await conn.receive()) is not None:
            assert isinstance(body, dict)
            answer = {
                "id": body["id"],
                "ok": False,
                "error": "shutting down: the request was not run",
                "draining": True,
            }
            await conn.stream.send_all(wire_frame(answer))

    async def main() -> None:
        transport = TcpTransport("B", lambda src, msg: None, stopping)
        async with trio.open_nursery() as nursery:
            port = await nursery.start(transport.serve, "127.0.0.1", 0)
            async with open_rpc("127.0.0.1", port, "B") as connected:
                transport.stop_listening()
                await trio.testing.wait_all_tasks_blocked()  # the listener task has closed it
                with pytest.raises(RpcError) as refused:
                    async with open_rpc("127.0.0.1", port, "B"):
                        pass
                assert refused.value.kind == "unreachable", refused.value
                with pytest.raises(RpcError) as answered:
                    await connected.call("request", 5.0, msg={})
                assert answered.value.kind == "draining" and "shutting down" in str(answered.value)
            nursery.cancel_scope.cancel()

    trio.run(main)
