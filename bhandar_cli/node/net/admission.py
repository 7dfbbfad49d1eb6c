"""The limits a listener puts on a connection before it knows who is at the other end.

Anyone who can reach a node's port may open connections to it, so until a connection has proved
who it is (a peer: its certificate and hello; a client: a token the node knows, or a node that
admits anyone; a joiner never does) it is held to small limits:

- its frames may be at most `PRE_AUTH_FRAME` bytes (a hello, an RPC call of a client the node
  does not know, a join request: all far smaller), so a 16 MiB "hello" is refused by its length
  prefix instead of being buffered and decoded;
- it has `HELLO_TIMEOUT` seconds, TLS handshake included, to be admitted (a join exchange has
  `JOIN_TIMEOUT` for the whole of it);
- at most `MAX_PENDING` such connections are open at once: one more evicts the oldest, so a flood
  of idle connections costs a bounded amount of memory and cannot lock out a peer or client that
  completes its hello in time.

Once admitted, a connection has the normal limits (`codec.DEFAULT_MAX_FRAME_SIZE`, no deadline).
At most `MAX_OPEN` connections are open in all; past it a new one is closed at once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import trio

from bhandar_cli.node.net.codec import DEFAULT_MAX_FRAME_SIZE, FrameDecoder
from bhandar_cli.node.net.frames import HELLO_TIMEOUT, FrameConn

log = logging.getLogger("bhandar.transport")

PRE_AUTH_FRAME = 64 * 1024
JOIN_TIMEOUT = 15.0  # the joiner's own deadline is 10 s: ours outlasts it
MAX_PENDING = 64
MAX_OPEN = 1024


@dataclass(eq=False)
class Ticket:
    """One connection's place at the listener: its cancel scope (cancelled by the hello deadline or
    an eviction) and the decoder whose frame limit it sets."""

    scope: trio.CancelScope
    decoder: FrameDecoder
    admitted: bool = False
    evicted: bool = False


@dataclass
class Admission:
    """The connections of one listener, and what they have been refused (counted for `info`)."""

    max_pending: int = MAX_PENDING
    max_open: int = MAX_OPEN
    open: int = 0
    stats: dict[str, int] = field(default_factory=lambda: {"evicted": 0, "over_cap": 0, "late_hello": 0})
    _pending: dict[Ticket, None] = field(default_factory=dict)  # oldest first

    @contextmanager
    def enter(self, conn: FrameConn) -> Iterator[Ticket | None]:
        """The place of a new connection for as long as it is served: a ticket, limited until
        `admit` (None: MAX_OPEN are open, close it); one closed before admission is logged."""
        ticket = self.arrive(conn.decoder)
        if ticket is None:
            yield None
            return
        try:
            with ticket.scope:
                yield ticket
        finally:
            self.leave(ticket)
        if ticket.scope.cancelled_caught and not ticket.admitted:
            why = "evicted by newer ones" if ticket.evicted else "no hello, or no token it knows, in time"
            log.warning("closed the connection from %s before it said who it is: %s", conn.peer, why)

    def arrive(self, decoder: FrameDecoder) -> Ticket | None:
        """A ticket for a new connection, limited until `admit`; None if MAX_OPEN are open."""
        if self.open >= self.max_open:
            self.stats["over_cap"] += 1
            return None
        if len(self._pending) >= self.max_pending:
            oldest = next(iter(self._pending))
            del self._pending[oldest]
            oldest.evicted = True
            oldest.scope.cancel()
            self.stats["evicted"] += 1
        decoder.max_frame_size = PRE_AUTH_FRAME
        ticket = Ticket(trio.CancelScope(deadline=trio.current_time() + HELLO_TIMEOUT), decoder)
        self._pending[ticket] = None
        self.open += 1
        return ticket

    def limit(self, ticket: Ticket, decoder: FrameDecoder) -> None:
        """The connection reads through `decoder` from now on (TLS on top of the socket)."""
        ticket.decoder, decoder.max_frame_size = decoder, ticket.decoder.max_frame_size

    def admit(self, ticket: Ticket) -> None:
        """The connection proved who it is: the normal limits from now on (again: nothing)."""
        if ticket.admitted:
            return
        self._pending.pop(ticket, None)
        ticket.admitted = True
        ticket.scope.deadline = math.inf
        ticket.decoder.max_frame_size = DEFAULT_MAX_FRAME_SIZE

    def extend(self, ticket: Ticket, seconds: float) -> None:
        """More time before admission (a join exchange), still under the other limits."""
        ticket.scope.deadline = trio.current_time() + seconds

    def leave(self, ticket: Ticket) -> None:
        if not ticket.admitted and not ticket.evicted and ticket.scope.cancelled_caught:
            self.stats["late_hello"] += 1
        self._pending.pop(ticket, None)
        self.open -= 1

    def view(self) -> dict[str, int]:
        """For `info`: connections open, those not admitted yet, and what was refused."""
        return {"open": self.open, "unauthenticated": len(self._pending), **self.stats}

    @property
    def pending(self) -> int:
        return len(self._pending)
