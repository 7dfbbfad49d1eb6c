"""Big frames on a connection: a batch stops growing at BATCH_BYTES (a batch of values at the size
limit must not outlast the send timeout), and the small frames queued with big ones leave first."""

from __future__ import annotations

import trio
import trio.testing

from bhandar_cli.node.net.frames import BATCH_BYTES, SMALL_FRAME, Outbox, small_first


class Recording(trio.abc.SendStream):
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))
        await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def test_small_frames_leave_ahead_of_big_ones_each_kind_in_its_order() -> None:
    big1, big2 = b"B" * (SMALL_FRAME + 1), b"C" * (SMALL_FRAME + 1)
    assert small_first([big1, b"a", big2, b"b"]) == [b"a", b"b", big1, big2]
    assert small_first([b"a", b"b"]) == [b"a", b"b"]


def test_a_batch_of_big_frames_is_cut_by_bytes_and_small_ones_go_first() -> None:
    big = b"x" * (BATCH_BYTES // 2 + 1)
    frames = [big, b"gossip", big, big, b"ack", big]

    async def main() -> list[bytes]:
        stream = Recording()
        out = Outbox(stream)
        for frame in frames:
            assert out.put(frame)
        with trio.move_on_after(1):
            await out.run()
        return stream.writes

    writes = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    sent = b"".join(writes)
    assert len(sent) == sum(map(len, frames)) and sent.count(b"gossip") == sent.count(b"ack") == 1
    assert all(len(w) <= BATCH_BYTES + len(big) for w in writes)
    assert len(writes) == 2  # four big frames did not leave in one write: two of them per write
    assert writes[0].startswith(b"gossip") and writes[1].startswith(b"ack")  # ahead of the big ones
