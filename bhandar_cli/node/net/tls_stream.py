"""`TlsStream`: TLS over a trio stream, through an `ssl.SSLObject` and two memory BIOs.

It does what `trio.SSLStream` does for the way nodes, clients and the echo baseline use TLS (one
task receiving, one task sending, no renegotiation: every context sets `OP_NO_RENEGOTIATION`),
with a fraction of its bookkeeping per call. A node spends most of its time moving small frames,
and `trio.SSLStream`'s `_retry` (conflict detectors, two locks, a checkpoint per call, a loop
written for every corner of TLS) was most of the cost of each record in a profile under `bench
--cluster`, more than the cipher. Here a `send_all` is one `SSLObject.write` and one write of its
bytes to the transport; a `receive_some` is one `SSLObject.read` when the records are already
buffered, else one read of the transport.

Errors are trio's: a TLS failure or a transport that broke is `trio.BrokenResourceError` (its
cause the `ssl.SSLError`), a stream used after `aclose` is `trio.ClosedResourceError`. A peer that
closes the TCP connection without a close_notify raises `Truncated` (a BrokenResourceError), as
trio's own SSLStream does: only a close_notify is a clean end (b""), since anyone on the path can
cut a TCP connection, also exactly between two frames, where the frame layer would not notice.
"""

from __future__ import annotations

import contextlib
import errno
import os
import ssl
from typing import Any

import trio

RECEIVE_SIZE = 65536
_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


def no_renegotiation(ctx: ssl.SSLContext) -> ssl.SSLContext:
    """`ctx`, refusing TLS 1.2 renegotiation (TLS 1.3 has none): `TlsStream` never has to read in
    order to write."""
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    return ctx


class Truncated(trio.BrokenResourceError):
    """The TLS stream ended without a close_notify: cut on the way, or its writer died."""


class TlsStream(trio.abc.Stream):
    """A TLS connection on `transport_stream`; `do_handshake` before the first send or receive."""

    def __init__(
        self,
        transport_stream: trio.abc.Stream,
        ctx: ssl.SSLContext,
        server_side: bool = False,
        server_hostname: str | None = None,
    ) -> None:
        self.transport_stream = transport_stream
        # Over a TCP socket, the socket's own reads and writes (see `_read`, `_write`); otherwise
        # (a test's memory stream) the transport's methods.
        self._sock: Any = transport_stream.socket if isinstance(transport_stream, trio.SocketStream) else None
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._ssl = ctx.wrap_bio(
            self._in, self._out, server_side=server_side, server_hostname=server_hostname
        )
        self._closed = False
        self._broken: BaseException | None = None
        self._flushing = False  # a task is writing the outgoing BIO to the transport
        self._flushed: trio.Event | None = None  # set when it is done, if another task waits

    # --- what pki and the frame layer read ------------------------------------------------------

    def getpeercert(self, binary_form: bool = False) -> Any:
        return self._ssl.getpeercert(binary_form)

    # --- handshake ------------------------------------------------------------------------------

    async def do_handshake(self) -> None:
        """Complete the handshake; BrokenResourceError (caused by the SSLError) if it fails."""
        while True:
            try:
                self._ssl.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                await self._fill()
            except ssl.SSLError as exc:
                await self._flush_quietly()  # the alert that says why, for the other side's log
                raise self._break(exc) from exc
        await self._flush()  # the last flight (and a server's session tickets)

    # --- trio.abc.Stream ------------------------------------------------------------------------

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self._check()
        try:
            self._ssl.write(data)
        except ssl.SSLError as exc:  # no renegotiation: a write never waits for a read
            raise self._break(exc) from exc
        await self._flush()

    def send_nowait(self, data: bytes | bytearray | memoryview) -> bool:
        """Encrypt `data` and write it to the socket if that needs no wait: True if it all went,
        False if some is left for `flush` (the kernel's buffer is full, another task is writing,
        or the transport is no socket). What a write costs when the peer keeps up: no await, no
        timer (frames.py `send_within` arms one only when this returns False)."""
        self._check()
        try:
            self._ssl.write(data)
        except ssl.SSLError as exc:
            raise self._break(exc) from exc
        sock, out = self._sock, self._out
        if sock is None or self._flushing:
            return False
        fd = sock.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("the socket was closed")
        pending = out.read()
        try:
            sent = os.write(fd, pending)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self._broken = exc
            raise _stream_error(exc) from exc
        if sent == len(pending):
            return True
        out.write(pending[sent:])  # the BIO was emptied above: the unsent tail is first again
        return False

    async def flush(self) -> None:
        """Write what `send_nowait` left (waits while the socket is full)."""
        self._check()
        await self._flush()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        size = RECEIVE_SIZE if max_bytes is None else max_bytes
        ended = False  # the transport reached its end: what the SSLObject holds is all there is
        while True:
            self._check()
            try:
                return self._ssl.read(size)
            except ssl.SSLWantReadError:
                if ended:
                    raise self._truncated(None) from None
            except ssl.SSLZeroReturnError:
                return b""  # close_notify: the other side ended the stream
            except ssl.SSLEOFError as exc:
                raise self._truncated(exc) from exc
            except ssl.SSLError as exc:
                raise self._break(exc) from exc
            if self._out.pending:  # a post-handshake message to answer (TLS 1.3 key update)
                await self._flush()
            ended = not await self._fill()

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport_stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        raise NotImplementedError("TLS has no half-close; aclose() the stream")

    async def aclose(self) -> None:
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        try:
            if self._broken is None:
                with contextlib.suppress(ssl.SSLError):
                    self._ssl.unwrap()  # queues our close_notify; the peer's is not waited for
                if self._out.pending and not self._flushing:
                    with contextlib.suppress(*_GONE):
                        await self._write(self._out.read())
        finally:
            await self.transport_stream.aclose()

    # --- inside ---------------------------------------------------------------------------------

    def _check(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the TLS stream was closed")
        if self._broken is not None:
            raise trio.BrokenResourceError("the TLS stream is broken") from self._broken

    def _truncated(self, exc: BaseException | None) -> Truncated:
        self._broken = exc or EOFError("no close_notify")  # ours must not go out on a cut stream
        return Truncated("the TLS stream was cut without close_notify (truncated)")

    def _break(self, exc: BaseException) -> trio.BrokenResourceError:
        self._broken = exc
        return trio.BrokenResourceError(f"TLS failed: {exc}")

    async def _fill(self) -> bool:
        """Read the transport into the incoming BIO; False at its end."""
        try:
            data = await self._read()
        except trio.BrokenResourceError as exc:
            self._broken = exc
            raise
        if not data:
            self._in.write_eof()
            return False
        self._in.write(data)
        return True

    async def _flush(self) -> None:
        """Write what the SSLObject queued to the transport, in order. One task writes at a time
        (the sender; the receiver only for a rare post-handshake answer): a task that finds
        another writing waits until it is done, since that one writes our bytes too."""
        if self._flushing:
            if self._flushed is None:
                self._flushed = trio.Event()
            await self._flushed.wait()
            self._check()
            return
        out = self._out
        if not out.pending:
            return
        self._flushing = True
        try:
            while out.pending:
                await self._write(out.read())
        except BaseException as exc:  # a record left half-written (cancelled too): no more sends
            self._broken = exc
            raise
        finally:
            self._flushing = False
            if self._flushed is not None:
                self._flushed.set()
                self._flushed = None

    async def _read(self) -> bytes:
        """The next bytes of the transport (b"" at its end).

        On a socket this is a read until it would block, then a wait for readability: what
        `trio.SocketStream.receive_some` does without its layers of context managers. A read
        that found data still goes through the scheduler once (as trio's does), so a task that
        always has bytes waiting cannot starve the others."""
        sock = self._sock
        if sock is None:
            return bytes(await self.transport_stream.receive_some(RECEIVE_SIZE))
        while True:
            fd = sock.fileno()
            if fd < 0:
                raise trio.ClosedResourceError("the socket was closed")
            try:
                data = os.read(fd, RECEIVE_SIZE)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                continue
            except OSError as exc:
                raise _stream_error(exc) from exc
            await trio.lowlevel.cancel_shielded_checkpoint()
            return data

    async def _write(self, data: bytes) -> None:
        """All of `data` to the transport. On a socket: `send` until it is taken, waiting for
        writability when the kernel's buffer is full (a cancel there leaves the stream broken)."""
        sock = self._sock
        if sock is None:
            await self.transport_stream.send_all(data)
            return
        view = memoryview(data)
        while view:
            fd = sock.fileno()
            if fd < 0:
                raise trio.ClosedResourceError("the socket was closed")
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)
            except OSError as exc:
                raise _stream_error(exc) from exc

    async def _flush_quietly(self) -> None:
        with contextlib.suppress(*_GONE):
            await self._flush()


def _stream_error(exc: OSError) -> trio.BrokenResourceError | trio.ClosedResourceError:
    if exc.errno == errno.EBADF:
        return trio.ClosedResourceError("the socket was closed")
    return trio.BrokenResourceError(f"socket failed: {exc}")
