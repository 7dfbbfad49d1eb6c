"""The web view's HTTP server: the page, its state as Server-Sent Events, and its command box.

An ASGI app on our HTTP/1.1 server (node/http/http1.py), as the node's HTTP API is. One
producer task builds the state snapshot (web/state.py) while at least one page is open, at most
`1 / MIN_INTERVAL` times a second and never more than a third of the time (a slow snapshot under
load spaces the next one out), and publishes it only when it changed; each page's event stream
sends the latest snapshot when it wakes, so a slow page skips snapshots instead of queueing them.
With no page open nothing is built, so the last snapshot may be from before the latest changes: a
new event stream and `GET /api/state` build a fresh one first, and never answer an older one.
Snapshots are built one at a time (`_building`), so a slow one never lands after a newer one.
Commands from the page run through the same REPL session as typed ones, one at a time, and are
echoed where the session prints.

The page runs commands with the session's rights (a `--connect` session holds the cluster's admin
token), so only the page this server served may drive it, and only through loopback: every
request must name this server in `Host` (127.0.0.1, localhost or [::1], and its port; a page that
got here by DNS rebinding names its own site), an `Origin`, if sent, must be this server too, and
a command must carry the key this run wrote into the page (`X-Bhandar-Key`), which no other
site's page can read, and so must an event stream (`/api/events?key=`: an `EventSource` sends no
header of its own, and a plain `<img>` of another site sends no `Origin` either).

Every response forbids framing (`Content-Security-Policy: frame-ancestors 'none'` and, for older
browsers, `X-Frame-Options: DENY`): a page of another site that framed this one could make a click
on its own content land on the command box. At most `MAX_STREAMS` event streams are open at once:
the newest wins and the oldest is told it was replaced and ends (its page stops reconnecting and
says so), since each of them comes from a page this server served (it holds the key), the newest is
the one a person just opened, and refusing it instead would leave them a dead page while
forgotten tabs hold the slots. Without a cap they held every connection the server takes.
"""

from __future__ import annotations

import functools
import hmac
import json
import logging
import math
import mimetypes
import secrets
import sys
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import trio

from bhandar_cli.core.model import BhandarError
from bhandar_cli.node.http import BodyRefused, Limits, Receive, RequestBody, Scope, Send, serve
from bhandar_cli.repl import Reply, Session
from bhandar_cli.web.state import WebState

MIN_INTERVAL = 0.2  # at most 5 snapshots a second
METRICS_INTERVAL = 1.0  # the metrics view asks every node for its histograms: once a second
PING_S = 15.0  # an SSE comment keeps idle connections (and proxies) open
MAX_BODY = 65536
# A few pages and their event streams, which send nothing after their request: no read timeout.
LIMITS = Limits(max_connections=64, read_timeout=None)
PAGE = "index.html"  # at /; the page's script and style sheet sit next to it in static/
KEY_SLOT = b'<meta name="bhandar-key" content="">'  # where the page is given this run's key
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
MAX_STREAMS = 8  # open event streams (pages) at once; far below LIMITS.max_connections
MAX_JSON_DEPTH = 32  # a command's body is one flat object: anything deeper is refused unparsed
# Sent with every response, error or not: no other site may frame the page (clickjacking).
NO_FRAMING = [(b"content-security-policy", b"frame-ancestors 'none'"), (b"x-frame-options", b"DENY")]

Echo = Callable[[str, list[Reply]], None]
log = logging.getLogger("bhandar.web")


def print_echo(session: Session) -> Echo:
    """Echo a page's command where the session prints: the line, then each reply's view, through
    the REPL's terminal when it has one (above its prompt, wrapped to its width)."""

    def echo(line: str, replies: list[Reply]) -> None:
        from rich.text import Text

        from bhandar_cli.repl import Terminal, reply_text

        terminal = session.terminal or Terminal(sys.stdout)
        terminal.print(Text(line, style="dim"))
        for reply in replies:
            terminal.write(reply_text(reply, session.output, terminal.render, session.commands))

    return echo


class WebServer:
    def __init__(self, session: Session, echo: Echo | None = None) -> None:
        self.session = session
        self.state = WebState(session)
        session.observers.append(self.state.observe)
        self.echo = echo if echo is not None else print_echo(session)
        self.snapshot = b""  # the latest snapshot's JSON
        self._compared = b""  # the same without its "at" stamp: what decides whether it changed
        self.seq = 0  # bumped by each published snapshot
        self.published = trio.Event()
        self.clients = 0
        self.client_came = trio.Event()
        self.commands = trio.Lock()
        self.snapshots_built = 0
        self.stopping = False  # set on shutdown: the event streams end, so connections close
        self.port: int | None = None
        self.key = secrets.token_urlsafe(24)  # this run's: commands must show it (X-Bhandar-Key)
        self.scope = trio.CancelScope()  # cancelled to stop serving in the background (background.py)
        self.finished = trio.Event()  # set when a background server has stopped
        self._metrics: dict[str, Any] | None = None
        self._metrics_at = -math.inf
        self.streams: deque[_Stream] = deque()  # the open event streams, oldest first
        self._building = trio.Lock()  # one snapshot at a time: none is published after a newer one

    # --- producing snapshots -------------------------------------------------------------------

    async def produce(self) -> None:
        """Build and publish snapshots while a page is open; idle (no cluster calls) otherwise."""
        while True:
            if not self.clients:
                self.client_came = trio.Event()
                await self.client_came.wait()
            started = trio.current_time()
            try:
                await self.refresh()
            except (trio.Cancelled, KeyboardInterrupt):
                raise
            except Exception as exc:  # a cluster stopping under us: say it, keep serving the last
                log.warning("web view: could not build the state: %s", exc)
            took = trio.current_time() - started
            await trio.sleep(max(MIN_INTERVAL, 2 * took))

    async def refresh(self) -> None:
        """Build a snapshot of the cluster now and publish it if it changed."""
        async with self._building:
            await self._refresh()

    async def _refresh(self) -> None:
        now = trio.current_time()
        if now - self._metrics_at >= METRICS_INTERVAL:
            self._metrics = await self.session.client.views.metrics()
            self._metrics_at = now
        snap = await self.state.snapshot(self._metrics)
        body = json.dumps(snap, separators=(",", ":")).encode()
        self.snapshots_built += 1
        if body != self._compared:
            self._compared = body
            # When it was built (Unix seconds, this host's clock), outside the comparison so an
            # unchanged cluster sends nothing: a reader compares it with when the event arrived.
            snap["at"] = round(time.time(), 3)
            self.snapshot = json.dumps(snap, separators=(",", ":")).encode()
            self.seq += 1
            self._wake_streams()

    def _wake_streams(self) -> None:
        self.published.set()
        self.published = trio.Event()

    # --- HTTP ------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path, method = scope["path"].strip("/"), scope["method"]
        request_body = RequestBody(scope, receive, MAX_BODY)
        try:
            self.check_caller(scope)
            if method == "GET" and path == "api/events":
                self.check_stream_key(scope)
                await self.events(receive, send)
                return
            status, body, ctype = await self.route(path, method, scope, request_body)
        except _HttpError as exc:
            status, body, ctype = exc.status, _json({"error": str(exc)}), "application/json"
        head = [
            (b"content-type", ctype.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
            *NO_FRAMING,
            *await request_body.settle(),
        ]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": body})

    def check_caller(self, scope: Scope) -> None:
        """Refuse (403) a request that does not name this server (DNS rebinding, another host)
        or that another site's page sent."""
        headers = dict(scope.get("headers", []))
        ours = {f"{name}:{self.port}".encode() for name in LOOPBACK_NAMES}
        host = headers.get(b"host", b"")
        if host not in ours:
            raise _HttpError(
                403,
                f"this page answers only as http://127.0.0.1:{self.port}/ (not as "
                f"{host.decode('latin-1')!r}); open that address",
            )
        origin = headers.get(b"origin")
        if origin is not None and origin.removeprefix(b"http://") not in ours:
            raise _HttpError(403, "requests are accepted from this page only")
        if scope["method"] == "POST":
            key = headers.get(b"x-bhandar-key", b"")
            if not hmac.compare_digest(key, self.key.encode()):
                raise _HttpError(
                    403, f"commands need the key of this page: reload http://127.0.0.1:{self.port}/"
                )

    def check_stream_key(self, scope: Scope) -> None:
        """Refuse (403) an event stream that does not carry this run's key (`?key=`)."""
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        key = (query.get("key") or [""])[0]
        if not hmac.compare_digest(key.encode("latin-1", "replace"), self.key.encode()):
            raise _HttpError(
                403, f"the event stream needs the key of this page: reload http://127.0.0.1:{self.port}/"
            )

    async def route(
        self, path: str, method: str, scope: Scope, request_body: RequestBody
    ) -> tuple[int, bytes, str]:
        if method == "GET" and (path == "" or path in _static_files()):
            name = path or PAGE
            data = resources.files("bhandar_cli.web").joinpath("static", name).read_bytes()
            if name == PAGE:
                data = data.replace(KEY_SLOT, KEY_SLOT.replace(b'""', f'"{self.key}"'.encode()))
            ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
            return 200, data, f"{ctype}; charset=utf-8"
        if method == "GET" and path == "api/state":
            try:
                await self.refresh()  # the state now, never one from before the last change
            except BhandarError as exc:  # the cluster cannot say: that, not an older state
                raise _HttpError(503, f"the cluster's state is unavailable: {exc}") from None
            return 200, self.snapshot, "application/json"
        if method == "GET" and path == "api/log":
            query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
            columns = (query.get("columns") or [""])[0]
            if not columns.isascii() or not columns.isdigit() or len(columns) > 4:
                raise _HttpError(400, "the log needs ?columns=N, the log box's width in characters")
            return 200, _json(self.state.log_view(int(columns))), "application/json"
        if method == "POST" and path in ("api/command", "api/focus"):
            body = await _body(scope, request_body)
            if path == "api/focus":
                ks, key = body.get("keyspace"), body.get("key")
                if not isinstance(ks, str) or not isinstance(key, str) or not ks or not key:
                    raise _HttpError(400, 'focus needs {"keyspace": KS, "key": KEY}')
                self.state.set_focus(ks, key)
                await self.refresh()
                return 200, _json({"ok": True}), "application/json"
            line = body.get("line")
            if not isinstance(line, str) or not line.strip():
                raise _HttpError(400, 'command needs {"line": "a REPL command"}')
            return 200, _json(await self.command(line)), "application/json"
        raise _HttpError(404, f"no such page: {method} /{path}")

    async def command(self, line: str, source: str = "web") -> dict[str, Any]:
        """Run one line of the REPL grammar in the session, echo it, and answer its replies."""
        async with self.commands:
            replies = await self.session.run_line(line)
        self.echo(f"{source}> {line}", replies)
        await self.refresh()  # the page sees what its command did at once
        return {"replies": [r.to_json() for r in replies]}

    async def events(self, receive: Receive, send: Send) -> None:
        head = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store"), *NO_FRAMING]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        stream = _Stream()
        self.streams.append(stream)
        if len(self.streams) > MAX_STREAMS:  # the oldest page gives way (see the module docstring)
            self.streams.popleft().replaced = True
            self._wake_streams()
        self.clients += 1
        self.client_came.set()
        try:
            # With no page open the producer idled: what it built last may be from before the
            # latest changes (a node revived since), and a page must never show that as live.
            try:
                await self.refresh()
            except (trio.Cancelled, KeyboardInterrupt):
                raise
            except Exception as exc:  # as in produce: the last snapshot, and the reason logged
                log.warning("web view: could not build the state: %s", exc)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_until_disconnect, receive, nursery.cancel_scope)
                seen = -1
                while not self.stopping and not stream.replaced:
                    if self.seq != seen and self.snapshot:
                        seen = self.seq
                        chunk = b"event: state\ndata: " + self.snapshot + b"\n\n"
                    else:
                        chunk = b": ping\n\n"
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    published = self.published
                    with trio.move_on_after(PING_S):
                        await published.wait()
                if stream.replaced:  # the page stops reconnecting: a newer page has the stream
                    chunk = b"event: replaced\ndata: {}\n\n"
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                nursery.cancel_scope.cancel()
            if self.stopping or stream.replaced:  # a page's EventSource reconnects to whatever serves next
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.clients -= 1
            if stream in self.streams:
                self.streams.remove(stream)

    async def serve(
        self, host: str, port: int, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve on host:port until cancelled; reports the bound port when listening."""
        async with trio.open_nursery() as nursery:
            self.port = await nursery.start(serve, self, host, port, LIMITS, log)
            nursery.start_soon(self.produce)
            task_status.started(self.port)
            try:
                await trio.sleep_forever()
            finally:
                # A page's event stream never ends by itself, and the server waits for open
                # responses before it stops: end them (a cancelled wait would not be woken).
                self.stopping = True
                self.published.set()


@dataclass(eq=False)
class _Stream:
    """One open event stream; `replaced` when a newer one took its place."""

    replaced: bool = False


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _until_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _body(scope: Scope, request_body: RequestBody) -> dict[str, Any]:
    headers = dict(scope.get("headers", []))
    if not headers.get(b"content-type", b"").startswith(b"application/json"):
        raise _HttpError(415, "send JSON (Content-Type: application/json)")
    try:
        raw = await request_body.read()
    except BodyRefused as exc:
        raise _HttpError(exc.status, str(exc)) from None
    if _nesting(raw) > MAX_JSON_DEPTH:  # before parsing: deep enough nesting overflows the parser
        raise _HttpError(400, f"the body nests deeper than {MAX_JSON_DEPTH} levels (send one flat object)")
    try:
        body = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        raise _HttpError(400, "the body is not JSON (UTF-8)") from None
    if not isinstance(body, dict):
        raise _HttpError(400, "the body must be a JSON object")
    return body


def _nesting(raw: bytes) -> int:
    """How deep the JSON text's arrays and objects nest, at most (brackets inside strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


@functools.cache
def _static_files() -> frozenset[str]:
    """The page's files that ship in the package (nothing else is served)."""
    folder = resources.files("bhandar_cli.web").joinpath("static")
    return frozenset(entry.name for entry in folder.iterdir() if entry.is_file())


def _json(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
