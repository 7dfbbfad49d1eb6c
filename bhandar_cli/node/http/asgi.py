"""What the two ASGI apps served here share (the node's HTTP API, node/http/api.py, and the web
view, web/server.py): serving them with limits, and reading a request's body.

`serve` is an accept loop of ours: past `Limits.max_connections` a new connection is closed at
once; a TLS connection has `HANDSHAKE_TIMEOUT` for its handshake; then the connection's one task
serves its requests in order with h11 (node/http/http1.py: keep-alive, pipelining, the head's
deadlines and caps, no task per request). `Limits.read_timeout` bounds a silence while a body is
read (off for the web view, whose pages hold event streams they never write to), and a body must
arrive whole within `BODY_TIMEOUT` (`RequestBody.read`), so one trickled a byte at a time does not
hold a connection and its buffer for ever.

Connections that have not yet shown a valid token are shed first (`Limits.unauthenticated`): a
connection is unauthenticated from its accept, through its TLS handshake, until one of its
requests passes the token check (the app calls the `Admit` it finds in the request's scope under
`ADMIT`); at most `unauthenticated` are, and one more closes the oldest of them (as the node port
does, node/net/admission.py). So a flood of silent connections, each held for the handshake
timeout, costs the node a bounded number of slots and never the room of clients with a token,
which is the cap less the unauthenticated budget. Each connection's task runs in a cancel scope
we hold, which is what closing it means. A token holds at most `per_token` of the authenticated
connections; one more stays unauthenticated and its request is refused 429 saying so.
"""

from __future__ import annotations

import logging
import ssl
from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import trio

from bhandar_cli.core.model import RateLimited, Unavailable
from bhandar_cli.node.http.http1 import App, Http1Connection, Receive, Scope
from bhandar_cli.node.http.https_only import HttpsOnlyListener, HttpsOnlyStream
from bhandar_cli.security import RefusalLog

# In a request's scope: the connection's `Admission` (below).
ADMIT = "bhandar.admit"


class Admit(Protocol):
    """A connection's admission, as a request on it sees it (`ADMIT` in its scope)."""

    @property
    def admitted(self) -> bool:
        """Whether a request on this connection has shown a valid token already."""

    async def __call__(self, token: str) -> None:
        """The request passed the token check (`token`: its id, "" when the node checks none);
        raises RateLimited or Unavailable past a cap. Awaited: a connection held by an HTTP front
        (node/http/fronts.py) asks its front, whose door it is."""


DRAIN_S = 2.0  # seconds an answered request's unread body has to arrive before the connection closes
BODY_TIMEOUT = 30.0  # seconds a request's whole body has to arrive in
HANDSHAKE_TIMEOUT = 5.0  # seconds for a TLS handshake: longer is a connection slot held for nothing


@dataclass(frozen=True)
class Limits:
    max_connections: int
    read_timeout: int | None  # seconds without a byte from the client; None: no limit
    # Connections without a valid token yet, at most (the oldest goes); None: every connection
    # counts as authenticated from its accept (the web view, which has no tokens).
    unauthenticated: int | None = None
    per_token: int | None = None  # authenticated connections of one token, at most


@dataclass(eq=False)
class _Admission:
    """`Admit` for one connection of a `_Door`."""

    door: _Door
    place: _Place

    @property
    def admitted(self) -> bool:
        return self.place.admitted

    async def __call__(self, token: str) -> None:
        self.door.admit(self.place, token)


@dataclass(eq=False)
class _Place:
    """One connection's place: its handler's cancel scope, and the token it was admitted with."""

    scope: trio.CancelScope
    peer: str
    admitted: bool = False
    evicted: bool = False
    token: str = ""


class _Door:
    """The connections of one server, by whether they have shown a token (see the module doc)."""

    def __init__(self, limits: Limits, log: RefusalLog) -> None:
        self.limits = limits
        self.log = log
        self.open = 0
        self.admitted = 0
        self.evicted = 0
        self._waiting: dict[_Place, None] = {}  # unauthenticated, oldest first
        self._by_token: Counter[str] = Counter()

    def arrive(self, peer: str) -> _Place | None:
        """A place for a new connection; None: the cap is reached (close it at once)."""
        budget = self.limits.unauthenticated
        if self.open >= self.limits.max_connections:
            self.log.refused(
                peer, "over the cap", f"{self.open} connections open: closed a new one from {peer} at once"
            )
            return None
        place = _Place(trio.CancelScope(), peer)
        self.open += 1
        if budget is None:
            place.admitted = True
            return place
        if len(self._waiting) >= budget:
            oldest = next(iter(self._waiting))
            del self._waiting[oldest]
            oldest.evicted = True
            oldest.scope.cancel()
            self.evicted += 1
            self.log.refused(
                oldest.peer,
                "evicted before a valid token",
                f"closed the connection from {oldest.peer}: {budget} connections without a valid token "
                "wait already, and it was the oldest",
            )
        self._waiting[place] = None
        return place

    def admit(self, place: _Place, token: str) -> None:
        """The connection's request passed the token check (token: its id)."""
        if place.admitted or place.evicted:  # evicted: its handler is being cancelled
            return
        limits = self.limits
        held = self._by_token[token]
        if token and limits.per_token is not None and held >= limits.per_token:
            raise RateLimited(
                f"token {token} holds {held} connections to this node, the most one token may: "
                "reuse them (keep-alive) or close some",
                1.0,
            )
        room = limits.max_connections - (limits.unauthenticated or 0)
        if self.admitted >= room:
            raise Unavailable(f"this node holds {self.admitted} HTTP connections with a token, its most")
        del self._waiting[place]
        place.admitted, place.token = True, token
        self.admitted += 1
        if token:
            self._by_token[token] += 1

    def leave(self, place: _Place) -> None:
        self.open -= 1
        self._waiting.pop(place, None)
        if place.admitted and self.limits.unauthenticated is not None:
            self.admitted -= 1
            if place.token:
                self._by_token[place.token] -= 1
                if not self._by_token[place.token]:
                    del self._by_token[place.token]


async def listen(host: str, port: int) -> list[trio.SocketListener]:
    """The HTTP port's listening sockets (port 0: a free one)."""
    return await trio.open_tcp_listeners(port, host=host)


async def serve(
    app: App,
    host: str,
    port: int,
    limits: Limits,
    log: logging.Logger,
    tls: tuple[str, str] | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on host:port (HTTPS with `tls` = (certificate file, key file)) until cancelled;
    reports the bound port when listening."""
    plain = await listen(host, port)
    await serve_listeners(app, plain, limits, log, tls, task_status=task_status)


async def serve_listeners(
    app: App,
    plain: list[trio.SocketListener],
    limits: Limits,
    log: logging.Logger,
    tls: tuple[str, str] | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on listening sockets already open (an HTTP front is handed its node's); reports
    their port when serving."""
    listeners: list[trio.abc.Listener[Any]] = list(plain)
    scheme = "http"
    if tls is not None:  # TLS, and plain HTTP told in one line to use https
        context = _tls_context(*tls)
        listeners = [HttpsOnlyListener(listener, context) for listener in plain]
        scheme = "https"
    door = _Door(limits, RefusalLog(log))
    server = plain[0].socket.getsockname()[:2]

    async def handle(stream: trio.abc.Stream) -> None:
        peer = _peer_of(stream)
        place = door.arrive(f"{peer[0]}:{peer[1]}" if peer else "?")
        if place is None:
            await trio.aclose_forcefully(stream)
            return
        extra = {"scheme": scheme, "client": peer, "server": server, ADMIT: _Admission(door, place)}
        try:
            with place.scope:
                if isinstance(stream, HttpsOnlyStream):
                    with trio.move_on_after(HANDSHAKE_TIMEOUT) as handshake:
                        try:
                            await stream.do_handshake()
                        except trio.BrokenResourceError:  # not TLS, or plain HTTP (answered)
                            await trio.aclose_forcefully(stream)
                            return
                    if handshake.cancelled_caught:
                        await trio.aclose_forcefully(stream)
                        return
                await Http1Connection(stream, app, limits.read_timeout, log, extra).run()
        finally:
            door.leave(place)
            if place.evicted:
                await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(trio.serve_listeners, handle, listeners, handler_nursery=nursery))
        task_status.started(server[1])


def _tls_context(cert: str, key: str) -> ssl.SSLContext:
    """The HTTPS port's TLS: the node's certificate, TLS 1.2 at least, no renegotiation."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    context.set_alpn_protocols(["http/1.1"])
    context.load_cert_chain(cert, key)
    return context


def _peer_of(stream: trio.abc.Stream) -> tuple[str, int] | None:
    """The other end's (host, port), under TLS or not (the refusal log, the scope's "client")."""
    raw = stream.transport_stream if isinstance(stream, HttpsOnlyStream) else stream
    if not isinstance(raw, trio.SocketStream):
        return None
    try:
        host, port = raw.socket.getpeername()[:2]
    except OSError:
        return None
    return str(host), int(port)


class BodyRefused(Exception):
    """The request body cannot be taken; the app answers `status` with this message."""

    status = 400


class BodyTooLarge(BodyRefused):
    """The request body is over the app's limit."""

    status = 413


class BodyCut(BodyRefused):
    """The connection ended (or timed out) before the whole body came: never taken as complete."""


class BodyTooSlow(BodyRefused):
    """The request body did not arrive whole within BODY_TIMEOUT."""

    status = 408


class RequestBody:
    """One request's body, read through `receive`: `read` takes it whole (up to `limit` bytes), and
    `settle`, called before the response starts, reads what the route left unread.

    Why settle: a route that refuses a request by its path, token or query answers before reading
    the body. The server then closes the keep-alive connection (the request is not over), and a
    client that sent its next request on it meanwhile sees "server disconnected" for a request it
    never had an answer to. Reading the rest first keeps the connection usable; a body too large to
    read, or one that does not come, gets `Connection: close` instead, so the client knows."""

    def __init__(self, scope: Scope, receive: Receive, limit: int) -> None:
        self._receive = receive
        self.limit = limit
        self.done = False  # the whole body, or the client's disconnect, has been received
        self.over = False  # what was read went over the limit, or did not come in time
        self.cut = False  # the connection ended before the body did
        self.declared: int | None = None
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit():
                self.declared = int(value)
        self.declared_over = self.declared is not None and self.declared > limit

    async def _next(self) -> bytes:
        message = await self._receive()
        if message["type"] != "http.request":  # the client went away (or fell silent: http1.py)
            self.done = self.cut = True
            return b""
        if not message.get("more_body"):
            self.done = True
        return bytes(message.get("body", b""))

    async def read(self) -> bytes:
        if self.declared_over:
            raise BodyTooLarge(f"request body of {self.declared} bytes is over the limit of {self.limit}")
        chunks: list[bytes] = []
        size = 0
        with trio.move_on_after(BODY_TIMEOUT):
            while not self.done:
                chunk = await self._next()
                size += len(chunk)
                if size > self.limit:
                    self.over = True
                    raise BodyTooLarge(f"request body over the limit of {self.limit} bytes")
                chunks.append(chunk)
            if self.cut:
                raise BodyCut("the request body was cut off: the connection ended before it")
            return b"".join(chunks)
        self.over = True
        raise BodyTooSlow(f"the request body did not arrive within {BODY_TIMEOUT:g} s")

    async def settle(self) -> list[tuple[bytes, bytes]]:
        """Read and drop the unread rest of the body; the headers the response needs for it:
        `Connection: close` when the rest is over the limit or does not arrive within DRAIN_S."""
        if self.done:
            return []
        if self.over or self.declared_over:
            return [(b"connection", b"close")]
        size = 0
        with trio.move_on_after(DRAIN_S):
            while not self.done and size <= self.limit:
                size += len(await self._next())
        return [] if self.done and size <= self.limit else [(b"connection", b"close")]
