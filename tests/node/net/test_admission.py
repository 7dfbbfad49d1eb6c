"""admission.py: the limits on a connection before it is admitted, and their lifting (virtual clock)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from bhandar_cli.core.model.errors import RateLimited, Unavailable
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


def test_one_token_holds_at_most_per_token_clients_and_the_next_is_refused_saying_so() -> None:
    async def body() -> None:
        admission = Admission(max_pending=4, max_open=64, max_clients=48, per_token=3)
        held = []
        for _ in range(3):
            ticket = admission.arrive(FrameDecoder())
            assert ticket is not None
            admission.admit_client(ticket, "reader")
            held.append(ticket)
        extra = admission.arrive(FrameDecoder())
        assert extra is not None
        with pytest.raises(RateLimited, match="token reader holds 3 connections to this node"):
            admission.admit_client(extra, "reader")
        # Not admitted: still under the limits before admission (deadline, eviction).
        assert not extra.admitted and extra.scope.deadline < math.inf and admission.pending == 1
        other = admission.arrive(FrameDecoder())  # another token is not held back by this one's
        assert other is not None
        admission.admit_client(other, "writer")
        assert admission.view()["clients"] == 4 and admission.view()["busiest_token"] == 3
        admission.leave(held[0])  # one closes: the token has room again
        admission.admit_client(extra, "reader")
        assert extra.admitted and admission.stats["clients_over_cap"] == 1

    in_virtual_time(body)


def test_clients_never_take_the_room_left_for_peers_and_waiting_connections() -> None:
    async def body() -> None:
        admission = Admission(max_pending=2, max_open=10, max_clients=6, per_token=100)
        for _ in range(6):
            ticket = admission.arrive(FrameDecoder())
            assert ticket is not None
            admission.admit_client(ticket, "")  # no token checks: no per-token cap
        crowd = admission.arrive(FrameDecoder())
        assert crowd is not None
        with pytest.raises(Unavailable, match="this node holds 6 client connections"):
            admission.admit_client(crowd, "")
        admission.leave(crowd)
        # Peers are admitted whatever clients hold: two waiting places and two for links remain.
        peers = [admission.arrive(FrameDecoder()) for _ in range(4)]
        for ticket in peers:
            assert ticket is not None
            admission.admit(ticket)
        assert admission.view()["open"] == 10 and admission.view()["clients"] == 6

    in_virtual_time(body)
