"""One HTTP/1.1 connection, served in the one trio task that holds it: h11 parses each request,
the app is awaited inline with the ASGI scope, `receive` and `send` built here, and the next
request (keep-alive, or already pipelined) is read only when the response is out, so responses go
in request order and a request costs no task of its own.

The deadlines the security model asks of the HTTP port are here (docs/security.md): a connection
idle between requests (or before its first) is closed after `KEEP_ALIVE`; a request head must be
whole within `HEAD_TIMEOUT` (else 408) and fit `MAX_HEAD` bytes (else 431, h11's
max_incomplete_event_size); a malformed one is answered 400 in one line, then closed. While the app
reads a body, `Limits.read_timeout` without a byte reads as the client's disconnect (the app's
RequestBody then refuses the cut body); the body's cap and its whole-body deadline are the app's
(asgi.RequestBody). A response whose write stalls past `WRITE_TIMEOUT` closes the connection.
"""

from __future__ import annotations

import email.utils
import logging
import math
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

import h11
import trio

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

KEEP_ALIVE = 5.0  # seconds a connection may sit idle between two requests (and before its first)
HEAD_TIMEOUT = 10.0  # seconds a request head has, from its first byte, to arrive whole (408 after)
MAX_HEAD = 16384  # bytes of a request head (request line and headers), at most (431 past it)
WRITE_TIMEOUT = 30.0  # seconds one write of a response may wait for the client to take it
LINGER_S = 1.0  # closing with a request unread: seconds its rest is read and dropped first
LINGER_BYTES = 1 << 20  # and how much of it, at most
READ_SIZE = 65536
MAX_PENDING = 65536  # bytes of pipelined requests held while a response streams; reading stops past it
REASONS = {s.value: s.phrase.encode() for s in HTTPStatus}
DISCONNECT = {"type": "http.disconnect"}


class _Date:
    """The Date header (RFC 9110 says an origin server with a clock sends one), made once a second."""

    def __init__(self) -> None:
        self.second = -1
        self.value = b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self.second:
            self.second, self.value = second, email.utils.formatdate(second, usegmt=True).encode()
        return self.value


_date = _Date()


def plain_answer(status: int, message: str) -> bytes:
    """A whole response that closes the connection: `status` and a one-line text body."""
    body = (message + "\n").encode()
    return (
        f"HTTP/1.1 {status} {REASONS.get(status, b'').decode()}\r\n"
        "content-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


class Http1Connection:
    """Serves the requests of one connection in order until it ends (see the module doc)."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        app: App,
        read_timeout: float | None,
        log: logging.Logger,
        extra: dict[str, Any],
    ) -> None:
        self.stream = stream
        self.app = app
        self.read_timeout = math.inf if read_timeout is None else float(read_timeout)
        self.log = log
        self.extra = extra  # put into every request's scope (scheme, client, server, the admit hook)
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self.broken = False  # a write failed or stalled: nothing more can be said on it
        # The request being answered:
        self._head: h11.Request | None = None
        self._response: h11.Response | None = None
        self._head_sent = False
        self._finished = False
        self._body_done = False
        self._pending: dict[str, Any] | None = None

    async def run(self) -> None:
        """Serve requests until the connection ends or must; close it."""
        try:
            while await self._serve_one():
                self.h11.start_next_cycle()
        except trio.BrokenResourceError:  # a write failed: the client is gone
            pass
        finally:
            await self._close()

    async def _serve_one(self) -> bool:
        """Read one request and answer it; whether the connection can take another."""
        request = await self._next_request()
        if request is None:
            return False
        self._head, self._response, self._head_sent = request, None, False
        self._finished = self._body_done = False
        self._pending = None
        target, _, query = request.target.partition(b"?")
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.http_version.decode(),
            "method": request.method.decode(),
            "path": urllib.parse.unquote(target.decode("ascii", "replace")),
            "raw_path": target,
            "query_string": query,
            "root_path": "",
            "headers": request.headers,  # (lower-case name, value) pairs, in the order sent
            **self.extra,
        }
        try:
            await self.app(scope, self._receive, self._send)
        except Exception:
            if self.broken:  # the client went while the app wrote: nothing to tell anyone
                return False
            self.log.exception("HTTP app failed on %s %s", scope["method"], scope["path"])
            if not self._head_sent:
                await self._write(plain_answer(500, "internal error (a bug): it is in the node's log"))
            return False
        if not self._finished:  # the app stopped mid-response (or never answered): end it so
            if not self._head_sent and not self.broken:
                self.log.error("HTTP app returned no response to %s %s", scope["method"], scope["path"])
                await self._write(plain_answer(500, "internal error (a bug): no response"))
            return False
        h = self.h11
        while h.their_state is h11.SEND_BODY:  # a body the app did not read: what is here already
            try:
                if h.next_event() is h11.NEED_DATA:
                    return False  # the rest is on its way: not worth waiting for
            except h11.RemoteProtocolError:
                return False
        return h.our_state is h11.DONE and h.their_state is h11.DONE and not self.broken

    async def _next_request(self) -> h11.Request | None:
        """The next request's head; None when the connection ends (answered, if it has to be)."""
        h = self.h11
        deadline: float | None = None  # set once a byte of the head is here
        while True:
            try:
                event = h.next_event()
            except h11.RemoteProtocolError as exc:
                status = exc.error_status_hint
                what = "request head too large" if status == 431 else "malformed request"
                await self._write(plain_answer(status, f"{what}: {exc}"))
                return None
            if isinstance(event, h11.Request):
                # h11 bounds a head only while it is incomplete: one that came whole in a read is
                # held to the same size here.
                size = len(event.target) + sum(len(name) + len(value) + 4 for name, value in event.headers)
                if size > MAX_HEAD:
                    await self._write(plain_answer(431, f"request head too large: over {MAX_HEAD} bytes"))
                    return None
                return event
            if event is not h11.NEED_DATA:  # ConnectionClosed
                return None
            now = trio.current_time()
            if deadline is None and h.trailing_data[0].strip():  # pipelined, or a part came
                deadline = now + HEAD_TIMEOUT
            wait = KEEP_ALIVE if deadline is None else min(deadline - now, self.read_timeout)
            data = await self._read(wait)
            if data is None:
                if deadline is not None:
                    late = f"the request head did not arrive within {HEAD_TIMEOUT:g} s"
                    await self._write(plain_answer(408, late))
                return None
            h.receive_data(data)

    async def _read(self, timeout: float) -> bytes | None:
        """Bytes from the client (b"" at its end); None when none came within `timeout`."""
        with trio.move_on_after(timeout):
            try:
                return bytes(await self.stream.receive_some(READ_SIZE))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return b""
        return None

    async def _write(self, data: bytes) -> None:
        if self.broken:
            raise trio.BrokenResourceError("the connection is closed")
        with trio.move_on_after(WRITE_TIMEOUT):
            try:
                await self.stream.send_all(data)
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        self.broken = True
        raise trio.BrokenResourceError("the client went away or stopped reading")

    # --- the ASGI calls ---------------------------------------------------------------------

    async def _receive(self) -> dict[str, Any]:
        if self._pending is not None:
            message, self._pending = self._pending, None
            return message
        if self._body_done:
            return await self._until_gone()
        h = self.h11
        while True:
            if h.they_are_waiting_for_100_continue:  # `Expect: 100-continue`: the app reads on
                await self._write(h.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
            try:
                event = h.next_event()
            except h11.RemoteProtocolError:  # a body that breaks its framing: the request is cut
                self._body_done = True
                return DISCONNECT
            if isinstance(event, h11.Data):
                data = bytes(event.data)
                try:  # the end is usually in the same read: say so now (one call less)
                    after = h.next_event()
                except h11.RemoteProtocolError:
                    after = None
                if isinstance(after, h11.EndOfMessage):
                    self._body_done = True
                    return {"type": "http.request", "body": data, "more_body": False}
                if isinstance(after, h11.Data):
                    self._pending = {"type": "http.request", "body": bytes(after.data), "more_body": True}
                elif after is None:
                    self._pending = DISCONNECT
                    self._body_done = True
                return {"type": "http.request", "body": data, "more_body": True}
            if isinstance(event, h11.EndOfMessage):
                self._body_done = True
                return {"type": "http.request", "body": b"", "more_body": False}
            if event is not h11.NEED_DATA:  # ConnectionClosed: cut before the body's end
                self._body_done = True
                return DISCONNECT
            chunk = await self._read(self.read_timeout)
            if not chunk:  # the client's end, or nothing for read_timeout: the body is cut
                self._body_done = True
                return DISCONNECT
            h.receive_data(chunk)

    async def _until_gone(self) -> dict[str, Any]:
        """After the whole request: wait for the client to leave (an app streaming a response
        asks), holding what it pipelines meanwhile for the next cycle."""
        h = self.h11
        while not self._finished:
            if len(h.trailing_data[0]) > MAX_PENDING:
                await trio.sleep_forever()  # no more reading until this response is over
            data = await self._read(math.inf)
            if not data:
                break
            h.receive_data(data)
        return DISCONNECT

    async def _send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if self._response is not None:
                raise RuntimeError("the response has started already")
            status = int(message["status"])
            headers = [*message.get("headers", ()), (b"date", _date.now())]
            reason = REASONS.get(status, b"")
            self._response = h11.Response(status_code=status, headers=headers, reason=reason)
            return
        if kind != "http.response.body":
            raise RuntimeError(f"an HTTP app sent {kind!r}")
        if self._response is None or self._finished:
            raise RuntimeError("a body sent outside a response")
        h = self.h11
        out: list[bytes | None] = []
        if not self._head_sent:
            self._head_sent = True
            out.append(h.send(self._response))
        body = message.get("body", b"")
        if body and self._head is not None and self._head.method != b"HEAD":
            out.append(h.send(h11.Data(data=body)))
        if not message.get("more_body", False):
            self._finished = True
            out.append(h.send(h11.EndOfMessage()))
        await self._write(b"".join(b for b in out if b))

    async def _close(self) -> None:
        """Close the connection; with a request not read to its end, read some of it first, so the
        client gets the answer before a reset."""
        stream = self.stream
        try:
            if not self.broken and self.h11.their_state in (h11.SEND_BODY, h11.ERROR):
                if isinstance(stream, trio.SocketStream):
                    await stream.send_eof()  # the answer is all there is: the client may close
                with trio.move_on_after(LINGER_S):
                    taken = 0
                    while taken < LINGER_BYTES and (data := await stream.receive_some(READ_SIZE)):
                        taken += len(data)
            with trio.move_on_after(1.0) as quick:
                await stream.aclose()
            if quick.cancelled_caught:
                await trio.aclose_forcefully(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await trio.aclose_forcefully(stream)
