"""What the two ASGI apps served by hypercorn share (the node's HTTP API, node/http/api.py, and the
web view, web/server.py): serving them with limits, the ASGI callable types, the lifespan
handshake and reading a request's body.

`serve` runs hypercorn's own connection handler (its trio `TCPServer`: all the HTTP is
hypercorn's) behind an accept loop of ours, because hypercorn has no cap on connections: past
`Limits.max_connections` a new connection is closed at once. It also sets what hypercorn leaves
open: a short TLS handshake timeout and a read timeout (`Limits.read_timeout`, off for the web
view, whose pages hold event streams they never write to). A body must arrive whole within
`BODY_TIMEOUT` (`RequestBody.read`), so one trickled a byte at a time does not hold a connection
and its buffer for ever.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def lifespan(receive: Receive, send: Send) -> None:
    """Answer hypercorn's lifespan messages until shutdown: the apps keep no state to set up."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


DRAIN_S = 2.0  # seconds an answered request's unread body has to arrive before the connection closes
BODY_TIMEOUT = 30.0  # seconds a request's whole body has to arrive in
HANDSHAKE_TIMEOUT = 5.0  # hypercorn's default is 60 s: a minute of a connection slot for nothing


@dataclass(frozen=True)
class Limits:
    max_connections: int
    read_timeout: int | None  # seconds without a byte from the client; None: no limit


async def serve(
    app: Callable[[Scope, Receive, Send], Awaitable[None]],
    host: str,
    port: int,
    limits: Limits,
    log: logging.Logger,
    tls: tuple[str, str] | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on host:port (HTTPS with `tls` = (certificate file, key file)) until cancelled;
    reports the bound port when listening."""
    from hypercorn.config import Config
    from hypercorn.trio.tcp_server import TCPServer
    from hypercorn.trio.worker_context import WorkerContext
    from hypercorn.typing import ConnectionState
    from hypercorn.utils import wrap_app

    config = Config()
    config.bind = [f"{host}:{port}"]
    if tls is not None:
        config.certfile, config.keyfile = tls
    config.accesslog = None
    config.errorlog = log
    config.ssl_handshake_timeout = HANDSHAKE_TIMEOUT
    config.read_timeout = limits.read_timeout
    sockets = config.create_sockets()
    (sock,) = sockets.secure_sockets or sockets.insecure_sockets
    sock.listen(config.backlog)
    plain = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    listener: trio.abc.Listener[Any] = plain
    ssl_context = config.create_ssl_context()
    if ssl_context is not None:  # TLS, and plain HTTP told in one line to use https
        from bhandar_cli.node.http.https_only import HttpsOnlyListener

        listener = HttpsOnlyListener(plain, ssl_context)
    # Our apps take plain dicts where hypercorn's types name each ASGI message.
    wrapped = wrap_app(app, config.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]
    context = WorkerContext(None)
    open_now = 0

    async def handle(stream: trio.abc.Stream) -> None:
        nonlocal open_now
        if open_now >= limits.max_connections:
            log.warning("%d connections open: closed a new one at once", open_now)
            await trio.aclose_forcefully(stream)
            return
        open_now += 1
        try:
            await TCPServer(wrapped, config, context, ConnectionState({}), stream)  # type: ignore[arg-type]
        finally:
            open_now -= 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(trio.serve_listeners, handle, [listener], handler_nursery=nursery))
        task_status.started(sock.getsockname()[1])


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
    the body. hypercorn then closes the keep-alive connection (the request is not over), and a
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
        if message["type"] != "http.request":  # the client went away (or hypercorn gave up on it)
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
