"""What the two ASGI apps served by hypercorn share (the node's HTTP API, node/http.py, and the
web view, web/server.py): the ASGI callable types, the lifespan handshake and reading a request's
body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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


class BodyTooLarge(Exception):
    """The request body is over the app's limit (the app answers 413 with this message)."""


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
        self.over = False  # what was read went over the limit
        self.declared: int | None = None
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit():
                self.declared = int(value)
        self.declared_over = self.declared is not None and self.declared > limit

    async def _next(self) -> bytes:
        message = await self._receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            self.done = True
        return bytes(message.get("body", b"")) if message["type"] == "http.request" else b""

    async def read(self) -> bytes:
        if self.declared_over:
            raise BodyTooLarge(f"request body of {self.declared} bytes is over the limit of {self.limit}")
        chunks: list[bytes] = []
        size = 0
        while not self.done:
            chunk = await self._next()
            size += len(chunk)
            if size > self.limit:
                self.over = True
                raise BodyTooLarge(f"request body over the limit of {self.limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

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
