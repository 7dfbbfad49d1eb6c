"""A node's HTTPS port answers plain HTTP in one line: "this port speaks HTTPS: use https://...".

Wrapped in a TLS stream alone, a request sent in plain text (`curl http://127.0.0.1:PORT/...`)
fails the handshake and the connection closes without a word (curl: (52) Empty reply from
server). asgi.serve's accept loop takes its TLS connections from `HttpsOnlyListener`, whose
streams look at the first byte the client sends before the handshake: a TLS record (0x16)
handshakes as before; a letter (an HTTP method) is answered `400` with the https URL the request
meant, logged, and closed. The handshake's timeout (asgi.HANDSHAKE_TIMEOUT, around `do_handshake`)
bounds the wait for that byte.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import ssl

import trio

from bhandar_cli.node.net import TlsStream
from bhandar_cli.security import RefusalLog

log = logging.getLogger("bhandar.http")
_refusals = RefusalLog(log)  # one line per source per interval (security/refusal_log.py)

TLS_HANDSHAKE = 0x16  # the first byte of a TLS record carrying a handshake (a ClientHello)
HEAD_LIMIT = 8192  # of a plain request read to name the URL it meant
_HOST = re.compile(rb"^host:[ \t]*([A-Za-z0-9.\-\[\]:]{1,255})[ \t]*$", re.IGNORECASE | re.MULTILINE)
_TARGET = re.compile(rb"^[A-Z]{3,10} (/[!-~]{0,2000}) HTTP/1\.[01]\r?$", re.MULTILINE)


def plain_http_answer(head: bytes, port: int) -> tuple[bytes, str]:
    """The response to a plain-HTTP request head sent to an HTTPS port, and the URL it names."""
    host = _HOST.search(head)
    target = _TARGET.search(head)
    where = host.group(1).decode() if host else f"127.0.0.1:{port}"
    url = f"https://{where}{target.group(1).decode() if target else '/'}"
    body = f"this port speaks HTTPS, not plain HTTP: use {url}\n".encode()
    head_out = (
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    return head_out + body, url


class HttpsOnlyStream(trio.abc.Stream):
    """The node's TLS stream (node/net/tls_stream.py, as its peer links use: a fraction of
    trio.SSLStream's bookkeeping per call), after a look at the first byte."""

    def __init__(self, raw: trio.SocketStream, context: ssl.SSLContext) -> None:
        self.transport_stream = raw  # the accept loop reads the peer's address through it
        self._tls = TlsStream(raw, context, server_side=True)

    async def do_handshake(self) -> None:
        first = await self.transport_stream.socket.recv(1, socket.MSG_PEEK)
        if first and first[0] != TLS_HANDSHAKE and chr(first[0]).isalpha():
            await self._answer_plain()
            raise trio.BrokenResourceError("plain HTTP sent to an HTTPS port")
        await self._tls.do_handshake()

    async def _answer_plain(self) -> None:
        raw = self.transport_stream
        head = b""
        with trio.move_on_after(2):  # what the request line and Host say; not more than that
            while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
                chunk = await raw.receive_some(HEAD_LIMIT - len(head))
                if not chunk:
                    break
                head += chunk
        port = raw.socket.getsockname()[1]
        answer, url = plain_http_answer(head, port)
        peer = raw.socket.getpeername()
        where = f"{peer[0]}:{peer[1]}"
        _refusals.refused(
            where, "plain HTTP", f"plain HTTP from {where} to HTTPS port {port}: answered 'use {url}'"
        )
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await raw.send_all(answer)
        await raw.aclose()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._tls.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._tls.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self._tls.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self._tls.aclose()


class HttpsOnlyListener(trio.abc.Listener[HttpsOnlyStream]):
    def __init__(self, inner: trio.SocketListener, context: ssl.SSLContext) -> None:
        self._inner = inner
        self._context = context

    async def accept(self) -> HttpsOnlyStream:
        return HttpsOnlyStream(await self._inner.accept(), self._context)

    async def aclose(self) -> None:
        await self._inner.aclose()
