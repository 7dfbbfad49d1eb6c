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

Admitted clients are held to two more limits, so that whoever holds a token (a read-only one
included) cannot take the port from everyone else:
- at most `MAX_CLIENTS` admitted client connections in all, which leaves room under `MAX_OPEN`
  for `MAX_PENDING` waiting ones and for the peers' links (peers are never counted as clients);
- at most `PER_TOKEN` per token. One more is not admitted: it stays under the limits above (its
  hello deadline, eviction by newer ones) and each call it makes is answered `rate_limited` (the
  token's holder's doing; `unavailable` when all clients together fill `MAX_CLIENTS`) with a
  sentence saying why. The new one is refused rather than the oldest closed because the oldest
  are the ones working (a REPL's, a service's): closing them would let whoever floods a token
  knock its other users off, and a client that reconnects in a loop would knock itself off.
  Connections a client forgot are closed by the idle limit (node/rpc_service.py), which gives
  their places back.
Without token checks (`--admit-anyone`, loopback only) there are no tokens and no per-token cap.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import trio

from bhandar_cli.core.model import RateLimited, Unavailable
from bhandar_cli.node.net.codec import DEFAULT_MAX_FRAME_SIZE, FrameDecoder
from bhandar_cli.node.net.frames import HELLO_TIMEOUT, FrameConn
from bhandar_cli.security import RefusalLog

log = logging.getLogger("bhandar.transport")

PRE_AUTH_FRAME = 64 * 1024
JOIN_TIMEOUT = 15.0  # the joiner's own deadline is 10 s: ours outlasts it
MAX_PENDING = 64
MAX_OPEN = 1024
MAX_CLIENTS = 768  # admitted client connections: MAX_OPEN - MAX_CLIENTS - MAX_PENDING is the peers'
PER_TOKEN = 64  # admitted client connections of one token (a CLI or REPL holds one per node)


@dataclass(eq=False)
class Ticket:
    """One connection's place at the listener: its cancel scope (cancelled by the hello deadline or
    an eviction) and the decoder whose frame limit it sets."""

    scope: trio.CancelScope
    decoder: FrameDecoder
    admitted: bool = False
    evicted: bool = False
    client: bool = False  # admitted as a client (counted in `clients`)
    token: str = ""  # the token id it was admitted with ("" without token checks)


@dataclass
class Admission:
    """The connections of one listener, and what they have been refused (counted for `info`)."""

    max_pending: int = MAX_PENDING
    max_open: int = MAX_OPEN
    max_clients: int = MAX_CLIENTS
    per_token: int = PER_TOKEN
    open: int = 0
    clients: int = 0
    stats: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("evicted", "over_cap", "late_hello", "clients_over_cap"), 0)
    )
    _pending: dict[Ticket, None] = field(default_factory=dict)  # oldest first
    _by_token: Counter[str] = field(default_factory=Counter)  # admitted client connections per token
    # This listener's refused connections, logged rate-limited (refusal_log.py): the window and
    # counts are the listener's, so another transport in the process (an in-process cluster's,
    # a test's) never folds its refusals into this one's line.
    refusals: RefusalLog = field(default_factory=lambda: RefusalLog(log))

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
            self.refusals.refused(
                conn.peer,
                "evicted before their hello" if ticket.evicted else "closed without a hello in time",
                f"closed the connection from {conn.peer} before it said who it is: {why}",
            )

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
        """The connection proved who it is (a peer): the normal limits from now on (again: nothing)."""
        if ticket.admitted:
            return
        self._lift(ticket)

    def admit_client(self, ticket: Ticket, token: str) -> None:
        """A client showed a token this node knows (`token`: its id; "" without token checks):
        the normal limits from now on, unless this token's connections (RateLimited) or all
        clients' (Unavailable) are at their most already; then the connection keeps the limits
        it had (a BhandarError says why)."""
        if ticket.admitted:
            return
        held = self._by_token[token]
        if token and held >= self.per_token:  # the token's holder's doing
            self.stats["clients_over_cap"] += 1
            raise RateLimited(
                f"token {token} holds {held} connections to this node, the most one token may: "
                "close some (idle ones close by themselves) and retry",
                1.0,
            )
        if self.clients >= self.max_clients:  # everyone's together: this node is full
            self.stats["clients_over_cap"] += 1
            raise Unavailable(f"this node holds {self.clients} client connections, its most: try another")
        self._lift(ticket)
        ticket.client, ticket.token = True, token
        self.clients += 1
        if token:
            self._by_token[token] += 1

    def _lift(self, ticket: Ticket) -> None:
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
        if ticket.client:
            ticket.client = False
            self.clients -= 1
            if ticket.token:
                self._by_token[ticket.token] -= 1
                if not self._by_token[ticket.token]:
                    del self._by_token[ticket.token]

    def view(self) -> dict[str, int]:
        """For `info`: connections open, those not admitted yet, admitted clients, the most one
        token holds, and what was refused."""
        busiest = max(self._by_token.values(), default=0)
        return {
            "open": self.open,
            "unauthenticated": len(self._pending),
            "clients": self.clients,
            "busiest_token": busiest,
            **self.stats,
        }

    @property
    def pending(self) -> int:
        return len(self._pending)
