"""The web view's doors, over real HTTP to a running view: no other site may frame it, a few
held event streams cannot lock a page out, and a body it cannot use is a 400 with one line.

The view is served by a REPL session on a 3-node in-process cluster (as the REPL's `web` command
serves it); the requests come from a thread, as a browser's would, to 127.0.0.1 only.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from urllib.parse import urlsplit

import trio

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.web.background import serve_in_background
from bhandar_cli.web.server import MAX_STREAMS
from tests.web.conftest import page_key


def _serving(check: Callable[[str], None]) -> None:
    """Run `check(url)` in a thread against a web view of a 3-node in-process cluster."""

    async def main() -> None:
        async with open_session(ClusterOptions(nodes=3, memory=True), "json", serve_in_background) as session:
            (reply,) = await session.run_line("web port=0")
            assert reply.ok, reply.to_json()
            await trio.to_thread.run_sync(check, reply.to_json()["url"])

    trio.run(main)


def _connect(url: str) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1" and parts.port is not None
    return http.client.HTTPConnection("127.0.0.1", parts.port, timeout=20)


def _request(
    url: str, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = _connect(url)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _unframable(headers: dict[str, str]) -> bool:
    return (
        headers.get("content-security-policy") == "frame-ancestors 'none'"
        and headers.get("x-frame-options") == "DENY"
    )


class _Stream:
    """An event stream held open, as a page's EventSource holds it."""

    def __init__(self, url: str, key: str) -> None:
        self.conn = _connect(url)
        self.conn.request("GET", f"/api/events?key={key}")
        self.response = self.conn.getresponse()

    def events_until_end(self) -> list[str]:
        """The event names it gets until the server ends it (bounded by the socket's timeout)."""
        names = []
        while line := self.response.readline():
            if line.startswith(b"event: "):
                names.append(line[7:].strip().decode())
        return names

    def next_event(self) -> str:
        """The next event's name, or "ping" for a keep-alive comment."""
        while True:
            line = self.response.readline()
            assert line, "the stream ended"
            if line.startswith(b"event: "):
                return line[7:].strip().decode()
            if line.startswith(b": ping"):
                return "ping"

    def close(self) -> None:
        self.conn.close()


def test_every_response_forbids_framing() -> None:
    def check(url: str) -> None:
        key = page_key(url)
        as_page = {"Content-Type": "application/json", "X-Bhandar-Key": key}
        answers: dict[str, tuple[int, dict[str, str]]] = {}
        for name, method, path, body, headers in (
            ("page", "GET", "/", None, {}),
            ("script", "GET", "/app.js", None, {}),
            ("state", "GET", "/api/state", None, {}),
            ("command", "POST", "/api/command", b'{"line": "status"}', as_page),
            ("bad body", "POST", "/api/command", b"{", as_page),
            ("no key", "POST", "/api/command", b'{"line": "status"}', {"Content-Type": "application/json"}),
            ("nothing here", "GET", "/nothing-here", None, {}),
        ):
            status, got, _ = _request(url, method, path, body, headers)
            answers[name] = (status, got)
        assert {n: s for n, (s, _) in answers.items()} == {
            "page": 200,
            "script": 200,
            "state": 200,
            "command": 200,
            "bad body": 400,
            "no key": 403,
            "nothing here": 404,
        }
        framable = [n for n, (_, got) in answers.items() if not _unframable(got)]
        assert framable == [], framable
        stream = _Stream(url, key)
        try:
            assert stream.response.status == 200
            assert _unframable({k.lower(): v for k, v in stream.response.getheaders()})
        finally:
            stream.close()

    _serving(check)


def test_event_streams_need_the_key_and_the_newest_page_wins() -> None:
    def check(url: str) -> None:
        key = page_key(url)
        for wrong in ("", "x"):
            refused = _Stream(url, wrong)
            try:
                assert refused.response.status == 403, refused.response.status
                assert "key of this page" in json.loads(refused.response.read())["error"]
            finally:
                refused.close()
        streams = [_Stream(url, key) for _ in range(MAX_STREAMS)]
        try:
            for s in streams:
                assert s.response.status == 200 and s.next_event() in ("state", "ping")
            newest = _Stream(url, key)  # one more than the server keeps: the oldest gives way
            streams.append(newest)
            assert newest.response.status == 200 and newest.next_event() in ("state", "ping")
            assert streams[0].events_until_end() == ["replaced"]
            # The page still loads and runs commands, and the newest stream gets the state.
            status, _, _ = _request(url, "GET", "/")
            assert status == 200
            as_page = {"Content-Type": "application/json", "X-Bhandar-Key": key}
            status, _, body = _request(url, "POST", "/api/command", b'{"line": "kill C"}', as_page)
            assert status == 200 and json.loads(body)["replies"][0]["changed"] is True
            seen = [newest.next_event() for _ in range(3)]
            assert "state" in seen, seen
        finally:
            for s in streams:
                s.close()

    _serving(check)


def test_a_body_it_cannot_use_is_a_400_with_one_line() -> None:
    def check(url: str) -> None:
        key = page_key(url)
        as_page = {"Content-Type": "application/json", "X-Bhandar-Key": key}
        deep_valid = json.dumps(
            {"line": "status", "extra": [[[[[[[[[[[[[[[[[[[[1] * 1]]]]]]]]]]]]]]]]]]] * 3}
        )
        bodies: dict[str, tuple[str, bytes]] = {
            "nested far": ("/api/command", b"[" * 30000 + b"]" * 30000),
            "nested open": ("/api/command", b'{"line":' + b"[" * 60000),
            "nested in a value": ("/api/command", b'{"line": "status", "x": ' + b"[" * 40 + b"]" * 40 + b"}"),
            "not utf-8": ("/api/command", b'{"line": "\xff\xfe"}'),
            "malformed": ("/api/command", b'{"line": '),
            "not an object": ("/api/command", b'["status"]'),
            "line a list": ("/api/command", b'{"line": ["status"]}'),
            "line a number": ("/api/command", b'{"line": 7}'),
            "focus of numbers": ("/api/focus", b'{"keyspace": 1, "key": {}}'),
        }
        for name, (path, body) in bodies.items():
            status, headers, answer = _request(url, "POST", path, body, as_page)
            assert status == 400, (name, status, answer[:200])
            error = json.loads(answer)["error"]
            assert error and "\n" not in error, (name, error)
            assert _unframable(headers)
        # Nesting within the limit (and brackets inside a string) in fields the command does not
        # read: still a command.
        status, _, answer = _request(url, "POST", "/api/command", deep_valid.encode(), as_page)
        assert status == 200, answer

    _serving(check)
