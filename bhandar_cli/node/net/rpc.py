"""RPC over frames: a pipelined client (many calls in flight, answers matched by id), one-shot
calls for probes, and a helper that runs background services around a block.

A client reaches a secure cluster over TLS, checking the node's certificate against the cluster
CA and its name against the node id (`ClientAccess`, security/access.py)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from bhandar_cli.node.net import codec
from bhandar_cli.node.net.blocking_rpc import RpcError
from bhandar_cli.node.net.cbor_validation import ProtocolError
from bhandar_cli.node.net.codec import encode_frame
from bhandar_cli.node.net.frames import (
    CONNECT_TIMEOUT,
    FRAME_TIMEOUT,
    STREAM_ERRORS,
    FrameConn,
    Outbox,
)
from bhandar_cli.node.net.tls_connect import HandshakeError, client_ctx, open_stream
from bhandar_cli.node.net.tls_stream import Truncated
from bhandar_cli.node.net.wire_versions import MIN_COMPATIBLE_VERSION
from bhandar_cli.security import PLAIN, ClientAccess

log = logging.getLogger("bhandar.rpc")


class _Slot:
    __slots__ = ("body", "event")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.body: Any = None


class RpcClient:
    """One client connection to a node; `call` may be used by many tasks at once.

    `label` names the node in messages; over TLS it is the node id its certificate must show."""

    def __init__(
        self,
        host: str,
        port: int,
        label: str = "",
        frame_timeout: float = FRAME_TIMEOUT,
        access: ClientAccess = PLAIN,
    ) -> None:
        self.host, self.port = host, port
        self.label = label or f"{host}:{port}"
        self.frame_timeout = frame_timeout
        self.access = access
        self.closed = False
        self.draining = False  # the node said it is stopping: send it nothing new
        self._pending: dict[int, _Slot] = {}
        self._next_id = 0
        self._outbox: Outbox | None = None
        self._stream: trio.abc.Stream | None = None
        self._lost = "not connected"

    async def connect(self) -> None:
        """Open the connection; raises RpcError (unreachable) if the node does not take it.

        Kept apart from `serve` so the error reaches the caller as itself, not wrapped in the
        exception group of whatever nursery will host `serve`.
        """
        ca = self.access.ca_cert
        try:
            self._stream = await open_stream(
                self.host, self.port, CONNECT_TIMEOUT, client_ctx(ca) if ca else None, self.label
            )
        except HandshakeError as exc:
            self.closed = True
            raise RpcError(
                f"node {self.label} at {self.host}:{self.port} failed the TLS check ({exc})", "unreachable"
            ) from None
        except (OSError, trio.TooSlowError) as exc:
            self.closed = True
            why = "no answer" if isinstance(exc, trio.TooSlowError) else _why(exc)
            raise RpcError(
                f"node {self.label} is not answering at {self.host}:{self.port} ({why})", "unreachable"
            ) from None
        self._outbox = Outbox(self._stream)
        hello: dict[str, Any] = {"hello": "client", "protocol": codec.protocol()}
        if self.access.token:
            hello["token"] = self.access.token  # checked by the node at each call
        # In the oldest version, as every call until the node's first answer says what it reads
        # (an answer comes in the newest version both read: codec.negotiate).
        self._outbox.put(encode_frame(hello, version=MIN_COMPATIBLE_VERSION))

    async def serve(self) -> None:
        """Write calls and read answers until the connection ends (never raises)."""
        assert self._stream is not None, "connect() first"
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write, nursery.cancel_scope)
                await self._read(FrameConn(self._stream, self.frame_timeout))
                nursery.cancel_scope.cancel()
        finally:
            self._close("the connection closed")
            await trio.aclose_forcefully(self._stream)

    async def _write(self, scope: trio.CancelScope) -> None:
        assert self._outbox is not None
        try:
            await self._outbox.run()
        except (*STREAM_ERRORS, trio.TooSlowError) as exc:
            self._lost = f"sending failed: {exc}"
        scope.cancel()

    async def _read(self, conn: FrameConn) -> None:
        try:
            while (body := await conn.receive()) is not None:
                if self._outbox is not None and conn.decoder.peer_version is not None:
                    self._outbox.version = min(codec.protocol(), conn.decoder.peer_version)
                if isinstance(body, dict) and body.get("notice") == "draining":
                    self.draining = True
                    continue
                if isinstance(body, dict) and body.get("notice") == "idle":
                    # The node closes this idle connection soon (node/rpc_service.py): new calls
                    # go on a new one (`closed`: the backends reopen), the ones sent already
                    # are answered here first.
                    self.closed = True
                    self._lost = "the node closed it after a while without calls"
                if isinstance(body, dict):
                    slot = self._pending.pop(body.get("id"), None)  # type: ignore[arg-type]
                    if slot is not None:
                        slot.body = body
                        slot.event.set()
                if self.closed and not self._pending:
                    return  # retired, nothing more to come: close it (the node sees its end)
            self._lost = "the node closed the connection"
        except ProtocolError as exc:
            self._lost = f"the node sent bad frames ({exc})"
        except Truncated as exc:  # not the node's goodbye: cut on the way, or the node died
            self._lost = str(exc)

    def _close(self, why: str) -> None:
        self.closed = True
        if self._outbox is not None:
            self._outbox.close()
        pending, self._pending = self._pending, {}
        for slot in pending.values():
            slot.event.set()  # body stays None: lost

    async def call(self, op: str, timeout: float = 5.0, **args: Any) -> Any:
        """Send one request; its answer's body. Raises RpcError."""
        if self.closed or self._outbox is None:
            raise RpcError(f"connection to node {self.label} lost ({self._lost})", "unreachable")
        self._next_id += 1
        rid = self._next_id
        slot = self._pending[rid] = _Slot()
        # Calls made at one moment leave in one frame (protocol 3: frames.py).
        if not self._outbox.put_message({"id": rid, "op": op, **args}):
            self._pending.pop(rid, None)
            # Not sent: nothing ran, unlike a call that went out and got no answer in time.
            raise RpcError(f"too many requests in flight to node {self.label}; this one was not sent", "busy")
        with trio.move_on_after(timeout):
            await slot.event.wait()
        self._pending.pop(rid, None)
        body = slot.body
        if body is None:
            if slot.event.is_set():
                # Sent, then the connection broke: the node may have acted on it ("lost", which
                # clients report as a timeout), unlike a request that never left ("unreachable").
                raise RpcError(
                    f"connection to node {self.label} lost before it answered ({self._lost}); "
                    "the request may have taken effect",
                    "lost",
                )
            raise RpcError(f"node {self.label} did not answer {op!r} within {timeout:g} s", "timeout")
        if not body.get("ok"):
            code = str(body.get("code", ""))
            kind = "draining" if body.get("draining") else "remote"  # draining: refused, not run
            raise RpcError(f"node {self.label}: {body.get('error', 'failed')}", kind, code)
        return body.get("body")


@asynccontextmanager
async def open_rpc(
    host: str, port: int, label: str = "", access: ClientAccess = PLAIN
) -> AsyncIterator[RpcClient]:
    """An RpcClient for the duration of the block; errors in the block come out as themselves."""
    client = RpcClient(host, port, label, access=access)
    await client.connect()
    async with hosting(client.serve) as error:
        try:
            yield client
        except Exception as exc:
            error.append(exc)


@asynccontextmanager
async def hosting(*services: Callable[[], Awaitable[None]]) -> AsyncIterator[list[BaseException]]:
    """Run background services around a block, then cancel them.

    With strict exception groups a failure in the block would come out of the nursery wrapped in
    an ExceptionGroup; the block puts its error in the yielded list instead and it is raised bare
    once the services are stopped.
    """
    error: list[BaseException] = []
    async with trio.open_nursery() as nursery:
        for service in services:
            nursery.start_soon(service)
        try:
            yield error
        finally:
            nursery.cancel_scope.cancel()
    if error:
        raise error[0]


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


async def rpc_once(
    host: str,
    port: int,
    op: str,
    timeout: float = 2.0,
    label: str = "",
    access: ClientAccess = PLAIN,
    **args: Any,
) -> Any:
    """Connect, make one call, disconnect (for probes and one-off admin commands)."""
    with trio.fail_after(timeout + CONNECT_TIMEOUT + 1.0):
        async with open_rpc(host, port, label, access) as client:
            return await client.call(op, timeout, **args)
