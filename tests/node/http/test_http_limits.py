"""asgi.serve: our HTTP/1.1 server (node/http/http1.py) behind an accept loop with limits.

Past the connection cap a new connection is closed at once; a TLS handshake, a client that sends
nothing, and a body trickled out each have a deadline. Served on 127.0.0.1 with a small app; the
deadlines are shortened so each test waits about a second. Each runs twice: served in this process,
and through an HTTP front (node/http/fronts.py, its link in memory), which keeps the same limits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import trio

from bhandar_cli.node.http import BodyRefused, Limits, Receive, RequestBody, Scope, Send, asgi
from bhandar_cli.security import pki
from tests.support.http_serving import WAYS, http_serving

DEADLINE = 10.0  # bounds every wait below; the limits under test are a second or two


async def echo_length(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the whole body and answers its length (or the status the body was refused with)."""
    if scope["type"] != "http":
        return
    body = RequestBody(scope, receive, 1 << 20)
    try:
        status, text = 200, str(len(await body.read())).encode()
    except BodyRefused as exc:
        status, text = exc.status, str(exc).encode()
    head = [(b"content-length", str(len(text)).encode()), *await body.settle()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": text})


WAY = [WAYS[0]]  # how `serving` serves: set per test by the `where` fixture


@pytest.fixture(autouse=True, params=WAYS)
def where(request: pytest.FixtureRequest) -> None:
    WAY[0] = request.param


def serving(limits: Limits, tls: tuple[str, str] | None = None) -> AbstractAsyncContextManager[int]:
    return http_serving(echo_length, limits, tls, WAY[0])


def run(body: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with trio.fail_after(DEADLINE):
            await body()

    trio.run(bounded)


async def closed(stream: trio.SocketStream) -> bool:
    """Whether the server closed `stream` (its end, or a reset) rather than answer."""
    try:
        return await stream.receive_some(1024) == b""
    except trio.BrokenResourceError:
        return True


async def status_of(port: int, request: bytes) -> int:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        answer = b""
        while b"\r\n" not in answer:
            chunk = await stream.receive_some(1024)
            assert chunk, f"closed without an answer to {request!r}"
            answer += chunk
        return int(answer.split()[1])


GET = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def test_past_the_cap_a_new_connection_is_closed_at_once_and_the_others_are_served() -> None:
    async def body() -> None:
        async with serving(Limits(max_connections=3, read_timeout=None)) as port:
            held = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(3)]
            extra = await trio.open_tcp_stream("127.0.0.1", port)
            with trio.fail_after(2.0):  # long before any timeout could close it
                assert await closed(extra)
            await held[0].send_all(GET)  # the ones within the cap are served as ever
            assert b"200" in await held[0].receive_some(1024)
            for stream in held:
                await stream.aclose()
            await trio.sleep(0.1)  # their slots come back as their tasks end
            assert await status_of(port, GET) == 200

    run(body)


@pytest.mark.parametrize("sent", [b"abc", b""], ids=["part-of-the-body", "none-of-the-body"])
def test_a_client_that_sends_nothing_for_the_read_timeout_is_closed_and_its_body_not_taken(
    sent: bytes,
) -> None:
    async def body() -> None:
        async with serving(Limits(max_connections=8, read_timeout=1)) as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n" + sent)
            answer = b""
            with trio.fail_after(4.0):
                while chunk := await stream.receive_some(1024):
                    answer += chunk
            # Closed, and the three bytes were never taken for the whole body (a 200 saying 3).
            assert answer == b"" or answer.split()[1] == b"400", answer

    run(body)


def test_a_body_trickled_out_past_its_deadline_is_refused_with_408(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asgi, "BODY_TIMEOUT", 1.0)

    async def body() -> None:
        async with serving(Limits(max_connections=8, read_timeout=None)) as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
            answer = b""

            async def trickle() -> None:
                for _ in range(100):
                    await stream.send_all(b"x")
                    await trio.sleep(0.2)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(trickle)
                while b"\r\n" not in answer:
                    answer += await stream.receive_some(1024)
                nursery.cancel_scope.cancel()
            assert answer.split()[1] == b"408", answer

    run(body)


def test_a_tls_handshake_that_does_not_come_is_given_up_quickly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(asgi, "HANDSHAKE_TIMEOUT", 1.0)
    pki.create_ca(tmp_path / "ca", "test")
    files = pki.issue_node(tmp_path / "ca", "A", ["127.0.0.1"], tmp_path / "A")

    async def body() -> None:
        async with serving(
            Limits(max_connections=8, read_timeout=None), (str(files.cert), str(files.key))
        ) as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)  # and never a ClientHello
            with trio.fail_after(4.0):
                assert await closed(stream)

    run(body)


def test_the_node_api_has_a_cap_a_read_timeout_and_a_short_handshake() -> None:
    from bhandar_cli.node.http import api

    assert api.LIMITS.max_connections and api.LIMITS.read_timeout
    assert asgi.HANDSHAKE_TIMEOUT <= 5
