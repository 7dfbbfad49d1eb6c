"""TLS on trio streams: opening a verified client connection, accepting a server-side one.

The certificates and contexts themselves are security/pki.py's; this module puts them on streams
(tls_stream.py's `TlsStream`),
with the handshake under a deadline (a peer that connects and never speaks must not hold a
listener's task), and turns a failed handshake into one `HandshakeError` that says why. Contexts
are built once per set of files: loading a CA and a key costs more than a handshake.
"""

from __future__ import annotations

import functools
import ssl
from pathlib import Path
from typing import Any

import trio

from bhandar_cli.node.net.tls_stream import TlsStream, no_renegotiation
from bhandar_cli.security import NodeTls, client_context, server_context


class HandshakeError(Exception):
    """The TLS handshake failed: the other side's certificate did not verify, it showed none
    when one was needed, or it is not speaking TLS."""


@functools.lru_cache(maxsize=16)
def server_ctx(files: NodeTls) -> ssl.SSLContext:
    return no_renegotiation(server_context(files))


@functools.lru_cache(maxsize=16)
def client_ctx(ca_cert: Path, identity: NodeTls | None = None, by_name: bool = True) -> ssl.SSLContext:
    """A client context; `by_name=False` checks the chain only, for a seed known by its address
    before anyone knows its node id (the caller reads the id from the certificate)."""
    ctx = no_renegotiation(client_context(ca_cert, identity))
    if not by_name:
        ctx.check_hostname = False  # verify_mode stays CERT_REQUIRED: the chain is still checked
    return ctx


def _reason(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return cause.verify_message or str(cause)
    if isinstance(cause, ssl.SSLError):
        return cause.reason or str(cause)
    return str(cause or exc) or "the connection closed during the handshake"


async def handshake(stream: TlsStream | trio.SSLStream[Any], timeout: float) -> None:
    """Complete the handshake within `timeout` seconds; raises HandshakeError or TooSlowError."""
    with trio.fail_after(timeout):
        try:
            await stream.do_handshake()
        except trio.BrokenResourceError as exc:
            raise HandshakeError(_reason(exc)) from None


async def open_stream(
    host: str,
    port: int,
    timeout: float,
    ctx: ssl.SSLContext | None = None,
    server_name: str | None = None,
) -> trio.abc.Stream:
    """A TCP connection to host:port, inside TLS when `ctx` is given (checking the certificate
    against `server_name` when the context checks names). Raises OSError, TooSlowError (the whole
    connect and handshake took longer than `timeout`) or HandshakeError."""
    with trio.fail_after(timeout):
        tcp = await trio.open_tcp_stream(host, port)
        if ctx is None:
            return tcp
        tls = TlsStream(tcp, ctx, server_hostname=server_name)
        try:
            await handshake(tls, timeout)
        except BaseException:
            await trio.aclose_forcefully(tcp)
            raise
        return tls
