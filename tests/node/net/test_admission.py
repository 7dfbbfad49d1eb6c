"""admission.py: the limits on a connection before it is admitted, and their lifting (virtual clock)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import trio
import trio.testing

from bhandar_cli.node.net.admission import PRE_AUTH_FRAME, Admission
from bhandar_cli.node.net.codec import DEFAULT_MAX_FRAME_SIZE, FrameDecoder
from bhandar_cli.node.net.frames import HELLO_TIMEOUT


def in_virtual_time(body: Callable[[], Awaitable[None]]) -> None:
    trio.run(body, clock=trio.testing.MockClock(autojump_threshold=0))


def test_before_admission_small_frames_and_a_deadline_after_it_the_normal_limits() -> None:
    async def body() -> None:
        admission = Admission(max_pending=4, max_open=8)
        ticket = admission.arrive(FrameDecoder())
        assert ticket is not None
        assert ticket.decoder.max_frame_size == PRE_AUTH_FRAME
        assert ticket.scope.deadline == trio.current_time() + HELLO_TIMEOUT
        admission.admit(ticket)
        admission.admit(ticket)  # a second time changes nothing
        assert ticket.decoder.max_frame_size == DEFAULT_MAX_FRAME_SIZE
        assert ticket.scope.deadline == math.inf
        assert (admission.pending, admission.open) == (0, 1)
        admission.leave(ticket)
        assert admission.open == 0 and admission.stats["late_hello"] == 0

    in_virtual_time(body)


def test_a_connection_that_does_not_say_its_hello_in_time_is_cancelled_and_counted() -> None:
    async def body() -> None:
        admission = Admission()
        ticket = admission.arrive(FrameDecoder())
        assert ticket is not None
        with ticket.scope:
            await trio.sleep_forever()
        admission.leave(ticket)
        assert ticket.scope.cancelled_caught and admission.stats["late_hello"] == 1

    in_virtual_time(body)


def test_the_oldest_waiting_connection_makes_room_and_past_the_cap_none_is_taken() -> None:
    async def body() -> None:
        admission = Admission(max_pending=2, max_open=3)
        first, second = admission.arrive(FrameDecoder()), admission.arrive(FrameDecoder())
        assert first is not None and second is not None
        admission.admit(second)
        third = admission.arrive(FrameDecoder())
        fourth = admission.arrive(FrameDecoder())
        assert third is not None and fourth is None  # three are open: the cap refuses a fourth
        assert admission.stats["over_cap"] == 1 and not first.evicted
        admission.leave(second)
        fifth = admission.arrive(FrameDecoder())  # room again; two wait already: the oldest goes
        assert fifth is not None and first.evicted and first.scope.cancel_called
        assert admission.stats["evicted"] == 1 and admission.pending == 2

    in_virtual_time(body)
