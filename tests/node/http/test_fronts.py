"""A node's HTTP fronts (`node run --http-workers N`, node/http/fronts.py): real front processes in
front of a node run in this process, on loopback, with tokens.

What must hold: the API answers through the fronts as without them (tokens checked by the node);
the node's connection caps are kept across its fronts (each its share; a token's cap asked of the
front's door over the link); a front that dies is replaced while the port keeps answering; the
fronts go when the node goes; a front that cannot start stops the node with the reason. The
behaviour and limits of one connection through a front are in test_http1.py (each case runs
through a front too).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from typer.testing import CliRunner

from bhandar_cli.node.http import fronts
from bhandar_cli.node.http.api import LIMITS
from bhandar_cli.node.http.asgi import Limits
from bhandar_cli.node.http.front_process import share
from bhandar_cli.node.http.http1 import Receive, Scope, Send
from tests.support.token_node import token_node

DEADLINE = 60.0
WORKERS = 2


def children() -> set[int]:
    """The live front processes this process's node started (other tests in this process may have
    started children of their own: a browser, say)."""
    me = os.getpid()
    found: set[int] = set()
    for task in os.listdir(f"/proc/{me}/task"):
        try:
            with open(f"/proc/{me}/task/{task}/children") as f:
                found |= {int(pid) for pid in f.read().split()}
        except OSError:
            continue
    return {pid for pid in found if _alive(pid) and _is_front(pid)}


def _is_front(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"bhandar_cli.node.http.front_process" in f.read()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def until(condition: Callable[[], bool]) -> None:
    """Wait for `condition()` to hold, polling (the test's deadline bounds it)."""
    while not condition():
        await trio.sleep(0.05)


async def request(port: int, method: str, path: str, token: str = "", body: bytes = b"") -> tuple[int, bytes]:
    """One request on a new connection: (status, body)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        return await request_on(stream, method, path, token, body)


async def request_on(
    stream: trio.SocketStream, method: str, path: str, token: str = "", body: bytes = b""
) -> tuple[int, bytes]:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: {len(body)}\r\n\r\n"
    await stream.send_all(head.encode() + body)
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return 0, b""
        answer += chunk
    head_part, _, rest = answer.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head_part.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    while len(rest) < length:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        rest += chunk
    return int(head_part.split()[1]), rest


def test_the_api_answers_through_the_fronts_and_the_node_checks_the_tokens(tmp_path: Path) -> None:
    async def main() -> None:
        with trio.fail_after(DEADLINE):
            async with token_node(tmp_path, WORKERS) as (_, _, port, tokens):
                assert len(children()) == WORKERS
                admin = tokens["admin"]
                assert (await request(port, "PUT", "/v1/keyspaces/one", admin, b'{"n": 1}'))[0] == 201
                assert (await request(port, "PUT", "/v1/kv/one/k", admin, b'{"value": "tea"}'))[0] == 204
                status, body = await request(port, "GET", "/v1/kv/one/k", admin)
                assert status == 200 and b'"values":["tea"]' in body
                status, body = await request(port, "GET", "/v1/kv/one/k")
                assert status == 401 and b"no token given" in body
                # Several requests on one keep-alive connection: admitted once, answered in order.
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                async with stream:
                    for i in range(5):
                        put = f'{{"value": "v{i}"}}'.encode()
                        assert (await request_on(stream, "PUT", f"/v1/kv/one/k{i}", admin, put))[0] == 204
                    assert b'"values":["v4"]' in (await request_on(stream, "GET", "/v1/kv/one/k4", admin))[1]

    trio.run(main)


def test_a_token_s_connection_cap_is_kept_across_the_fronts(tmp_path: Path) -> None:
    """Each front holds its share of the token's cap: asked by the node, told by the front's door."""
    part = share(LIMITS, WORKERS)
    assert part.per_token is not None and LIMITS.per_token is not None
    per_front, node_cap = part.per_token, LIMITS.per_token
    assert per_front * WORKERS <= LIMITS.per_token + WORKERS - 1

    async def main() -> None:
        with trio.fail_after(DEADLINE):
            async with token_node(tmp_path, WORKERS) as (_, _, port, tokens):
                held: list[trio.SocketStream] = []
                refused: list[bytes] = []
                over = 24
                for _ in range(node_cap + over):  # past the node's whole cap for one token
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                    held.append(stream)
                    status, body = await request_on(stream, "GET", "/v1/status", tokens["admin"])
                    assert status in (200, 429), (status, body)
                    if status == 429:
                        refused.append(body)
                admitted = len(held) - len(refused)
                # Never more than the node's cap for one token; past a front's share, refused with
                # the reason (the kernel deals connections to the fronts, not always evenly).
                assert admitted <= per_front * WORKERS and len(refused) >= over
                for body in refused:
                    assert f"token {tokens['admin_id']} holds {per_front} connections".encode() in body
                for stream in held:
                    await stream.aclose()

    trio.run(main)


def test_a_front_that_dies_is_replaced_and_the_fronts_go_with_the_node(tmp_path: Path) -> None:
    async def main() -> None:
        with trio.fail_after(DEADLINE):
            async with token_node(tmp_path, WORKERS) as (_, _, port, tokens):
                first = children()
                assert len(first) == WORKERS
                victim = min(first)
                os.kill(victim, signal.SIGKILL)
                await until(lambda: len(children()) == WORKERS and victim not in children())
                # Every new connection is served (by the survivor, then by both).
                for _ in range(20):
                    assert (await request(port, "GET", "/v1/status", tokens["admin"]))[0] == 200
                running = children()
            # The node stopped: its fronts saw their links close and exited.
            await until(lambda: not (running & children()))

    trio.run(main)


def test_a_front_that_cannot_start_stops_the_node_s_http_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fronts, "front_command", lambda *_: [sys.executable, "-c", "raise SystemExit(3)"])

    async def main() -> None:
        async def app(scope: Scope, receive: Receive, send: Send) -> None:  # no request comes
            raise AssertionError("a front that never served forwarded a request")

        limits = Limits(max_connections=4, read_timeout=None)
        log = logging.getLogger("test")
        with trio.fail_after(DEADLINE), pytest.raises(ExceptionGroup) as caught:
            async with trio.open_nursery() as nursery:
                await nursery.start(fronts.serve_fronts, app, "127.0.0.1", 0, 1, limits, 1024, log, "A")
        assert caught.group_contains(fronts.FrontFailed, match=r"exited before it served \(status 3\)")

    trio.run(main)


def test_node_run_and_cluster_up_refuse_a_bad_number_of_http_workers(tmp_path: Path) -> None:
    from bhandar_cli.cli.app import app

    node_run = ["node", "run", "--id", "A", "--data-dir", str(tmp_path / "A")]
    for args, said in (
        ([*node_run, "--http-workers", "65"], "--http-workers must be 0..64 (got 65)"),
        ([*node_run, "--http-workers", "2", "--http-port", "-1"], "--http-workers needs the HTTP API"),
        (
            ["cluster", "up", "--dir", str(tmp_path / "c"), "--http-workers", "-1"],
            "--http-workers must be 0..64",
        ),
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert said in result.output
    assert not (tmp_path / "c").exists() and not (tmp_path / "A").exists()
