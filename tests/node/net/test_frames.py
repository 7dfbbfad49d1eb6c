"""Frames on a stream, without sockets: reading several frames from one chunk and one frame from
several chunks, the timeouts of a half-sent frame and of a write nobody takes, and writing the
frames of one burst in one `send_all`."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from bhandar_cli.node.net.cbor_validation import ProtocolError
from bhandar_cli.node.net.codec import encode_frame
from bhandar_cli.node.net.frames import SEND_TIMEOUT, FrameConn, Outbox

BODIES = [{"id": i, "op": "request", "msg": {"k": "x" * i}} for i in range(6)]


class ScriptedStream(trio.abc.Stream):
    """Hands out the given chunks, one per `receive_some` (then the end), and records every
    `send_all`."""

    def __init__(self, chunks: list[bytes] | None = None) -> None:
        self.chunks = list(chunks or [])
        self.reads = 0
        self.sent: list[bytes] = []

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        self.reads += 1
        return self.chunks.pop(0) if self.chunks else b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        self.sent.append(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def receive_all(conn: FrameConn) -> list[object]:
    out: list[object] = []
    while (body := await conn.receive()) is not None:
        out.append(body)
    return out


def test_every_frame_of_one_chunk_is_returned_from_a_single_read() -> None:
    stream = ScriptedStream([b"".join(encode_frame(b) for b in BODIES)])

    async def main() -> None:
        conn = FrameConn(stream)
        for body in BODIES:
            assert await conn.receive() == body
        assert stream.reads == 1  # all six came out of the one chunk
        assert await conn.receive() is None

    trio.run(main)


def test_a_frame_split_across_reads_is_put_back_together() -> None:
    wire = b"".join(encode_frame(b) for b in BODIES[:3])
    # Cut inside the first length prefix, inside a payload, and across the second frame's end.
    cuts = [2, 9, len(encode_frame(BODIES[0])) + 5, len(wire) - 3]
    chunks = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
    stream = ScriptedStream(chunks)

    async def main() -> None:
        assert await receive_all(FrameConn(stream)) == BODIES[:3]
        assert stream.reads == len(chunks) + 1  # the last read is the end of the stream

    trio.run(main)


def test_frames_queued_by_tasks_woken_by_the_same_burst_leave_in_one_send() -> None:
    """The first frame wakes the writer; a task woken alongside it queues the next. Trio runs a
    turn's tasks in either order, so the writer sometimes runs first: it must still wait one turn
    for the other's frame. Twenty rounds make a writer that does not wait fail almost surely."""
    frames = [encode_frame(b) for b in BODIES[:2]]

    async def main() -> None:
        stream = ScriptedStream()
        out = Outbox(stream)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(out.run)
            for _ in range(20):
                woken = trio.Event()

                async def second(woken: trio.Event = woken) -> None:
                    await woken.wait()
                    assert out.put(frames[1])

                nursery.start_soon(second)
                await trio.testing.wait_all_tasks_blocked()
                assert out.put(frames[0])
                woken.set()
                await trio.testing.wait_all_tasks_blocked()
            out.close()
        assert stream.sent == [frames[0] + frames[1]] * 20

    trio.run(main)


def test_an_outbox_writes_a_lone_frame_without_waiting_for_more() -> None:
    async def main() -> None:
        stream = ScriptedStream()
        out = Outbox(stream)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(out.run)
            assert out.put(encode_frame(BODIES[0]))
            await trio.testing.wait_all_tasks_blocked()
            assert stream.sent == [encode_frame(BODIES[0])]
            out.close()

    trio.run(main)


class StalledStream(ScriptedStream):
    """Hands out its chunks, then never sends more (nor closes); never takes a write."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self.chunks:
            return await super().receive_some(max_bytes)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.sleep_forever()


def test_a_frame_left_half_sent_closes_the_connection_after_the_frame_timeout() -> None:
    frame = encode_frame(BODIES[3])

    async def main() -> None:
        conn = FrameConn(StalledStream([frame + frame[:5]]), frame_timeout=5.0)
        assert await conn.receive() == BODIES[3]
        started = trio.current_time()
        with pytest.raises(ProtocolError, match="incomplete frame"):
            await conn.receive()
        assert trio.current_time() - started == pytest.approx(5.0)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_connection_quiet_between_frames_is_not_timed_out() -> None:
    async def main() -> None:
        conn = FrameConn(StalledStream([encode_frame(BODIES[1])]), frame_timeout=5.0)
        assert await conn.receive() == BODIES[1]
        with trio.move_on_after(3600) as waited:
            await conn.receive()
        assert waited.cancelled_caught  # still waiting for a next frame an hour later

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_an_outbox_whose_peer_takes_nothing_fails_after_the_send_timeout() -> None:
    async def main() -> None:
        out = Outbox(StalledStream())
        assert out.put(encode_frame(BODIES[0]))
        started = trio.current_time()
        with pytest.raises(trio.TooSlowError):
            await out.run()
        assert trio.current_time() - started == pytest.approx(SEND_TIMEOUT)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
