"""node/http/http1.py through asgi.serve: one task per connection and none per request, requests
answered in order (keep-alive, pipelined), HEAD, streamed bodies, `Connection: close`, 100-continue,
and the head's limits (400 malformed, 431 too large, 408 too slow, the keep-alive deadline).

Served on 127.0.0.1 with a small app; the deadlines under test are shortened to about a second,
and every wait is bounded. Each test but the task count runs twice: served in this process, and
through an HTTP front (node/http/fronts.py: the front's Forwarder and the node's FrontLink over a
link in memory), which must keep every behaviour and limit the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

import pytest
import trio

from bhandar_cli.node.http import BodyRefused, Limits, Receive, RequestBody, Scope, Send
from tests.support.http_serving import WAYS, http_serving

DEADLINE = 10.0  # bounds every test; the limits under test are a second or two
LIMITS = Limits(max_connections=8, read_timeout=None)


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers "METHOD PATH QUERY LENGTH-OF-BODY"; /stream answers in two chunks, the second once
    `release` is set; /boom fails."""
    if scope["path"] == "/boom":
        raise ValueError("a bug in the app")
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first;", "more_body": True})
        await release.wait()
        await send({"type": "http.response.body", "body": b"second"})
        return
    if scope["path"] == "/stream-then-read":  # starts its answer before it reads the body
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first;", "more_body": True})
        read = RequestBody(scope, receive, 1 << 20)
        await send({"type": "http.response.body", "body": str(len(await read.read())).encode()})
        return
    body = RequestBody(scope, receive, 1 << 20)
    try:
        status, text = 200, str(len(await body.read()))
    except BodyRefused as exc:
        status, text = exc.status, str(exc)
    query = scope["query_string"].decode()
    answer = f"{scope['method']} {scope['path']} {query} {text}".encode()
    head = [(b"content-length", str(len(answer)).encode()), *await body.settle()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": answer})


release = trio.Event()


WAY = [WAYS[0]]  # how `serving` serves: set per test by the `where` fixture


@pytest.fixture(autouse=True, params=WAYS)
def where(request: pytest.FixtureRequest) -> None:
    WAY[0] = request.param


def serving(limits: Limits = LIMITS) -> AbstractAsyncContextManager[int]:
    return http_serving(echo, limits, None, WAY[0])


def run(body: Callable[[], Awaitable[None]], instruments: tuple[trio.abc.Instrument, ...] = ()) -> None:
    async def bounded() -> None:
        global release
        release = trio.Event()
        with trio.fail_after(DEADLINE):
            await body()

    trio.run(bounded, instruments=instruments)


class Reader:
    """Reads HTTP/1.1 responses (Content-Length bodies) off a client stream."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def fill(self) -> bool:
        chunk = await self.stream.receive_some(65536)
        self.buffer += chunk
        return bool(chunk)

    async def until_seen(self, marker: bytes) -> None:
        while marker not in self.buffer:
            assert await self.fill(), f"closed before {marker!r}: {self.buffer!r}"

    async def until_last_chunk(self) -> None:
        """Read a chunked response to its end (the empty last chunk)."""
        while not self.buffer.endswith(b"0\r\n\r\n"):
            assert await self.fill(), f"closed before the last chunk: {self.buffer!r}"

    async def response(self, head_only: bool = False) -> tuple[int, dict[bytes, bytes], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            assert await self.fill(), f"closed mid-response: {self.buffer!r}"
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        headers = dict(line.lower().split(b": ", 1) for line in lines[1:])
        size = 0 if head_only else int(headers.get(b"content-length", b"0"))
        while len(self.buffer) < size:
            assert await self.fill(), "closed mid-body"
        body, self.buffer = self.buffer[:size], self.buffer[size:]
        return int(lines[0].split()[1]), headers, body

    async def closed(self) -> bool:
        """Whether the server closes the connection (an end or a reset), with nothing more said."""
        try:
            return not await self.fill() and not self.buffer
        except trio.BrokenResourceError:
            return not self.buffer


def get(path: str, *extra: str) -> bytes:
    return "\r\n".join([f"GET {path} HTTP/1.1", "Host: x", *extra, "", ""]).encode()


class TaskCount(trio.abc.Instrument):
    def __init__(self) -> None:
        self.spawned = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned += 1


def test_keep_alive_requests_on_one_connection_start_no_task() -> None:
    """In the node's process no task per request; through a front, none at the front and one at
    the node, which runs each forwarded request in a task of its own (they share the link)."""
    count = TaskCount()
    per_request = 1 if (WAY[0] == WAYS[1]) else 0

    async def body() -> None:
        async with serving() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            reader = Reader(stream)
            await stream.send_all(get("/first"))  # the connection's own task starts here
            assert (await reader.response())[0] == 200
            before = count.spawned
            for i in range(20):
                await stream.send_all(get(f"/kv/{i}"))
                status, _, answer = await reader.response()
                assert (status, answer) == (200, f"GET /kv/{i}  0".encode())
            spawned = count.spawned - before
            assert spawned == 20 * per_request, f"{spawned} tasks for 20 requests"
            await stream.aclose()

    run(body, (count,))


def test_pipelined_requests_are_answered_in_order_on_one_connection() -> None:
    async def body() -> None:
        async with serving() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            reader = Reader(stream)
            post = b"POST /b?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
            await stream.send_all(get("/a") + post + get("/c%2Fd"))
            answers = [(await reader.response())[2] for _ in range(3)]
            assert answers == [b"GET /a  0", b"POST /b x=1 5", b"GET /c/d  0"]
            await stream.aclose()

    run(body)


def test_head_has_the_get_s_headers_and_no_body_and_the_connection_stays() -> None:
    async def body() -> None:
        async with serving() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            reader = Reader(stream)
            await stream.send_all(b"HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n" + get("/y"))
            status, headers, _ = await reader.response(head_only=True)
            assert status == 200 and headers[b"content-length"] == b"10"  # len("HEAD /x  0")
            assert (await reader.response())[2] == b"GET /y  0"  # nothing of HEAD's body came between
            await stream.aclose()

    run(body)


def test_a_streamed_response_arrives_in_chunks_as_the_app_sends_them() -> None:
    async def body() -> None:
        async with serving() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            reader = Reader(stream)
            await stream.send_all(get("/stream"))
            await reader.until_seen(b"first;")  # before the app sends the rest
            assert b"transfer-encoding: chunked" in reader.buffer.lower()
            assert b"second" not in reader.buffer
            release.set()
            await reader.until_last_chunk()
            assert b"second" in reader.buffer
            await stream.send_all(get("/after"))  # and the connection is still usable
            reader.buffer = b""
            assert (await reader.response())[2] == b"GET /after  0"
            await stream.aclose()

    run(body)


def test_an_app_that_streams_before_it_reads_the_body_gets_the_body() -> None:
    # Through a front, the body is read only when the node's app asks: the wait for the client's
    # leaving that a streaming response starts must not take the body's bytes for it.
    async def body() -> None:
        async with serving() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            reader = Reader(stream)
            head = b"PUT /stream-then-read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            await stream.send_all(head)
            await reader.until_seen(b"first;")
            await stream.send_all(b"4\r\nabcd\r\n0\r\n\r\n")
            await reader.until_last_chunk()
            assert reader.buffer.split(b"first;", 1)[1].startswith(b"\r\n1\r\n4\r\n"), reader.buffer
            await stream.aclose()

    run(body)


def test_connection_close_is_answered_then_closed() -> None:
    async def body() -> None:
        async with serving() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            reader = Reader(stream)
            await stream.send_all(get("/a", "Connection: close"))
            status, headers, _ = await reader.response()
            assert status == 200 and headers[b"connection"] == b"close"
            assert await reader.closed()

    run(body)


def test_expect_100_continue_is_told_to_send_its_body() -> None:
    async def body() -> None:
        async with serving() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            reader = Reader(stream)
            head = b"PUT /k HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"
            await stream.send_all(head)
            assert (await reader.response(head_only=True))[0] == 100
            await stream.send_all(b"abc")
            assert (await reader.response())[2] == b"PUT /k  3"
            await stream.aclose()

    run(body)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n", 400),
        (b"NOT A REQUEST\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n", 413),
    ],
    ids=["bad-header", "bad-request-line", "headers-too-large", "body-over-the-cap-unsent"],
)
def test_a_bad_request_is_answered_in_one_line_and_closed(request_bytes: bytes, status: int) -> None:
    async def body() -> None:
        async with serving() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            reader = Reader(stream)
            await stream.send_all(request_bytes)
            got, headers, answer = await reader.response()
            assert got == status, answer
            assert headers[b"connection"] == b"close" and answer.count(b"\n") <= 1 and answer
            assert await reader.closed()

    run(body)


def test_a_head_trickled_out_past_its_deadline_is_answered_408(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bhandar_cli.node.http.http1.HEAD_TIMEOUT", 1.0)

    async def body() -> None:
        async with serving() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            reader = Reader(stream)

            async def trickle() -> None:
                for byte in get("/slow")[:-2]:  # never the blank line that ends the head
                    await stream.send_all(bytes([byte]))
                    await trio.sleep(0.1)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(trickle)
                status, _, answer = await reader.response()
                nursery.cancel_scope.cancel()
            assert status == 408, answer
            assert await reader.closed()

    run(body)


def test_an_idle_keep_alive_connection_is_closed_after_the_keep_alive_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("bhandar_cli.node.http.http1.KEEP_ALIVE", 0.5)

    async def body() -> None:
        async with serving() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            reader = Reader(stream)
            await stream.send_all(get("/a"))
            assert (await reader.response())[0] == 200
            with trio.fail_after(3.0):  # far less than the test's deadline
                assert await reader.closed()

    run(body)


def test_an_app_that_fails_is_answered_500_and_the_server_serves_on() -> None:
    async def body() -> None:
        async with serving() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            reader = Reader(stream)
            await stream.send_all(get("/boom"))
            status, headers, _ = await reader.response()
            assert status == 500 and headers[b"connection"] == b"close"
            assert await reader.closed()
            again = await trio.open_tcp_stream("127.0.0.1", port)
            await again.send_all(get("/fine"))
            assert (await Reader(again).response())[0] == 200
            await again.aclose()

    run(body)
