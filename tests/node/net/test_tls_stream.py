"""TlsStream (node/net/tls_stream.py): TLS over a real loopback TCP connection, as nodes use it."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio

from bhandar_cli.node.net import frames
from bhandar_cli.node.net.codec import encode_frame
from bhandar_cli.node.net.frames import FrameConn, send_within
from bhandar_cli.node.net.tls_connect import HandshakeError, client_ctx, handshake, open_stream, server_ctx
from bhandar_cli.node.net.tls_stream import TlsStream, Truncated
from bhandar_cli.security import pki

Handler = Callable[[TlsStream], Awaitable[None]]
Certs = tuple[pki.NodeTls, pki.NodeTls]


def in_trio(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test body under trio (the suite runs trio itself, with no plugin)."""

    @functools.wraps(test)  # pytest reads the fixtures it needs from the wrapped signature
    def run(**fixtures: Any) -> None:
        trio.run(partial(test, **fixtures))

    return run


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """Node A's identity, and B's from another cluster's CA (which A must refuse)."""
    root = tmp_path_factory.mktemp("tls")
    pki.create_ca(root / "ca", "test")
    pki.create_ca(root / "other", "other")
    a = pki.issue_node(root / "ca", "A", ["127.0.0.1"], root / "A")
    b = pki.issue_node(root / "other", "B", ["127.0.0.1"], root / "B")
    return a, b


@asynccontextmanager
async def server(tls: pki.NodeTls, handler: Handler) -> AsyncIterator[tuple[int, list[BaseException]]]:
    """A listener running `handler` on each TLS connection after the handshake; yields its port and
    what the handshakes or handlers raised."""
    errors: list[BaseException] = []

    async def serve(tcp: trio.SocketStream) -> None:
        stream = TlsStream(tcp, server_ctx(tls), server_side=True)
        try:
            await handshake(stream, 5.0)
            await handler(stream)
        except (HandshakeError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            errors.append(exc)
        finally:
            await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        yield listeners[0].socket.getsockname()[1], errors
        nursery.cancel_scope.cancel()


async def connect(port: int, tls: pki.NodeTls) -> TlsStream:
    stream = await open_stream("127.0.0.1", port, 5.0, client_ctx(tls.ca_cert, None), "A")
    assert isinstance(stream, TlsStream)
    return stream


async def echo(stream: TlsStream) -> None:
    while data := await stream.receive_some():
        await stream.send_all(data)


async def read_exactly(stream: TlsStream, n: int) -> bytes:
    got = bytearray()
    while len(got) < n:
        chunk = await stream.receive_some()
        assert chunk, f"the stream ended after {len(got)} of {n} bytes"
        got += chunk
    return bytes(got)


@in_trio
async def test_bytes_cross_both_ways_small_and_big(certs: Certs) -> None:
    a, _ = certs
    async with server(a, echo) as (port, errors):
        client = await connect(port, a)
        assert pki.peer_node_id(client) == "A"
        for size in (1, 200, 16_384, 100_000, 1 << 20):
            data = bytes(i % 251 for i in range(size))
            async with trio.open_nursery() as nursery:  # the echo comes back while we still send
                nursery.start_soon(client.send_all, data)
                assert await read_exactly(client, size) == data
        await client.aclose()
    assert errors == []


@in_trio
async def test_a_certificate_of_another_ca_fails_the_handshake(certs: Certs) -> None:
    a, b = certs
    async with server(a, echo) as (port, _):
        with pytest.raises(HandshakeError, match="self-signed certificate in certificate chain"):
            await connect(port, b)  # B trusts only its own CA, which did not sign A


@in_trio
async def test_a_peer_that_shows_a_foreign_certificate_is_refused(certs: Certs) -> None:
    a, b = certs
    async with server(a, echo) as (port, errors):
        tcp = await trio.open_tcp_stream("127.0.0.1", port)
        client = TlsStream(tcp, client_ctx(a.ca_cert, b), server_hostname="A")  # shows B's certificate
        with pytest.raises((HandshakeError, trio.BrokenResourceError)):
            await handshake(client, 5.0)
            await client.send_all(b"x")
            assert await client.receive_some() == b""
            raise trio.BrokenResourceError("the server ended the connection")
        await trio.aclose_forcefully(client)
        with trio.fail_after(5):
            while not errors:
                await trio.sleep(0.01)
        assert isinstance(errors[0], HandshakeError)


@in_trio
async def test_close_notify_ends_the_stream_and_a_bare_tcp_close_is_reported_as_truncation(
    certs: Certs,
) -> None:
    """Only a close_notify is the other side's end. A TCP close without one (what an attacker on
    the path can make, also exactly between two frames) raises Truncated, through the frame layer
    too, where an end between frames would otherwise look clean."""
    a, _ = certs
    ways: list[str] = []

    async def close_after_one(stream: TlsStream) -> None:
        await stream.send_all(await stream.receive_some())
        if ways[-1] == "notify":
            await stream.aclose()
        else:
            await stream.transport_stream.aclose()  # no close_notify

    async with server(a, close_after_one) as (port, _):
        for way in ("notify", "bare", "bare-between-frames"):
            ways.append(way)
            client = await connect(port, a)
            frame = encode_frame({"ping": way})
            await client.send_all(frame)
            if way == "bare-between-frames":
                conn = FrameConn(client)
                assert await conn.receive() == {"ping": way}
                with pytest.raises(Truncated, match="without close_notify"):
                    await conn.receive()
            else:
                assert await read_exactly(client, len(frame)) == frame
                if way == "notify":
                    assert await client.receive_some() == b""
                else:
                    with pytest.raises(Truncated, match="without close_notify"):
                        await client.receive_some()
            await client.aclose()
            with pytest.raises(trio.ClosedResourceError):
                await client.send_all(b"after close")


@in_trio
async def test_a_send_cut_short_by_a_timeout_leaves_the_stream_broken(certs: Certs) -> None:
    a, _ = certs
    never_read = trio.Event()

    async def do_not_read(stream: TlsStream) -> None:
        await never_read.wait()

    async with server(a, do_not_read) as (port, _):
        client = await connect(port, a)
        with trio.move_on_after(0.5) as scope:
            await client.send_all(b"x" * (64 << 20))  # far beyond the kernel's buffers
        assert scope.cancelled_caught
        with pytest.raises(trio.BrokenResourceError):
            await client.send_all(b"more")  # half a record went out: nothing may follow it
        await client.aclose()
        never_read.set()


def test_renegotiation_is_off_in_every_context(certs: Certs) -> None:
    import ssl

    a, _ = certs
    for ctx in (server_ctx(a), client_ctx(a.ca_cert, None), client_ctx(a.ca_cert, a, False)):
        assert ctx.options & ssl.OP_NO_RENEGOTIATION


@in_trio
async def test_send_within_writes_at_once_or_flushes_the_rest_in_order(certs: Certs) -> None:
    """Frames written without waiting (send_nowait) and a big write the kernel takes only in part
    (the rest flushed under the timer) arrive whole and in order."""
    a, _ = certs
    async with server(a, echo) as (port, errors):
        client = await connect(port, a)
        small = [bytes([i]) * 300 for i in range(50)]
        big = bytes(i % 253 for i in range(4 << 20))  # beyond the socket buffers: a partial write
        assert client.send_nowait(small[0])  # an idle connection takes a small write at once
        expected = b"".join(small) + big + b"end"

        async def write() -> None:
            for frame in small[1:]:
                await send_within(client, frame)
            await send_within(client, big)
            await send_within(client, b"end")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(write)
            assert await read_exactly(client, len(expected)) == expected
        await client.aclose()
    assert errors == []


@in_trio
async def test_send_within_gives_up_on_a_peer_that_does_not_read(
    certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = certs
    monkeypatch.setattr(frames, "SEND_TIMEOUT", 0.3)
    never_read = trio.Event()

    async def do_not_read(stream: TlsStream) -> None:
        await never_read.wait()

    async with server(a, do_not_read) as (port, _):
        client = await connect(port, a)
        with pytest.raises(trio.TooSlowError):
            for _ in range(1000):  # 64 MiB at most: the buffers fill long before
                await send_within(client, b"x" * (64 << 10))
        await client.aclose()
        never_read.set()
