"""A node's HTTP fronts (`bhandar node run --http-workers N`): N processes in front of the node
that hold its HTTP connections, so TLS and HTTP parsing run on other cores than the node's loop.

The node opens the HTTP port itself and hands the listening sockets to each front it starts
(node/http/front_process.py); the kernel gives each new connection to one of the fronts waiting
in accept. A front does all a connection needs (TLS, h11, the caps and deadlines of asgi.py and
http1.py, each front with its share of the caps) and forwards each request over a local link of
its own (a socket pair; frames in node/http/front_link.py). Here, the node's end of each link
(`FrontLink`) runs the API app for each request, a task each, with an ASGI scope rebuilt from the
front's and an admission that asks the front's door (`_Forwarded`). So the app, the token checks
and the core are the node's, exactly as without fronts.

A front that exits is logged and started again (after `RESTART_S`); one that exits before it
first serves stops the node with the reason, so a broken front is loud, not a port that hangs.
The fronts stop with the node: when the node's process ends, their links close and they exit.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import subprocess
import sys
from dataclasses import asdict
from typing import Any

import trio

from bhandar_cli.core.model import RateLimited, Unavailable
from bhandar_cli.node.http.asgi import ADMIT, Limits, listen
from bhandar_cli.node.http.front_link import (
    Frame,
    FrameKind,
    LinkBroken,
    LinkWriter,
    read_frames,
)
from bhandar_cli.node.http.front_process import share
from bhandar_cli.node.http.http1 import DISCONNECT, App

ASGI_VERSION = {"version": "3.0", "spec_version": "2.3"}
RESTART_S = 1.0  # after a front exits, before another takes its place
STOP_S = 2.0  # a front told to stop (its link closed) has this long to exit before it is killed


class FrontFailed(Exception):
    """A front exited before it served: the node cannot serve HTTP as asked."""


class _Forwarded:
    """One request a front forwarded: its scope, its body as it comes, and its connection's
    admission, asked of the front (the `Admit` of asgi.py)."""

    def __init__(self, link: FrontLink, frame: Frame) -> None:
        (_, rid, method, path, raw_path, query, headers, version, client, admitted, body, more) = frame
        self.link = link
        self.rid = rid
        self.scope: dict[str, Any] = {
            "type": "http",
            "asgi": ASGI_VERSION,
            "http_version": version,
            "method": method,
            "path": path,
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": [(bytes(name), bytes(value)) for name, value in headers],
            "scheme": link.scheme,
            "client": None if client is None else (str(client[0]), int(client[1])),
            "server": link.server,
            ADMIT: self,
        }
        self._admitted = bool(admitted)
        self._first: dict[str, Any] | None = {"type": "http.request", "body": body, "more_body": more}
        self._rest: tuple[trio.MemorySendChannel[dict[str, Any]], trio.MemoryReceiveChannel[dict[str, Any]]]
        self._rest = trio.open_memory_channel[dict[str, Any]](math.inf)
        self._gone = False
        self._asked = not more  # READ sent, or no body left to ask for
        self._start: list[Any] | None = None  # the response's status and headers, sent with its body
        self._verdict: Frame | None = None
        self._verdict_came = trio.Event()

    @property
    def admitted(self) -> bool:
        return self._admitted

    async def __call__(self, token: str) -> None:
        if self._admitted:
            return
        self.link.writer.send([FrameKind.ADMIT, self.rid, token])
        await self._verdict_came.wait()
        verdict, self._verdict = self._verdict, None
        self._verdict_came = trio.Event()
        if verdict is not None and verdict[0] == FrameKind.NOT_ADMITTED:
            _, _, code, message, retry = verdict
            if code == "rate_limited":
                raise RateLimited(message, float(retry))
            raise Unavailable(message)
        self._admitted = True

    def hear(self, frame: Frame) -> None:
        kind = frame[0]
        if kind == FrameKind.BODY:
            self._rest[0].send_nowait({"type": "http.request", "body": frame[2], "more_body": frame[3]})
        elif kind == FrameKind.GONE:
            self._gone = True
            self._rest[0].send_nowait(DISCONNECT)
        elif kind in (FrameKind.ADMITTED, FrameKind.NOT_ADMITTED):
            self._verdict = frame
            self._verdict_came.set()

    async def receive(self) -> dict[str, Any]:
        if self._first is not None:
            message, self._first = self._first, None
            return message
        if not self._asked:
            self._asked = True
            self.link.writer.send([FrameKind.READ, self.rid])
        try:
            return self._rest[1].receive_nowait()
        except trio.WouldBlock:
            if self._gone:
                return DISCONNECT
        return await self._rest[1].receive()

    async def send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            headers = [[name, value] for name, value in message.get("headers", ())]
            self._start = [int(message["status"]), headers]
        elif kind == "http.response.body":
            body, more = bytes(message.get("body", b"")), bool(message.get("more_body", False))
            if self._start is not None:
                self.link.writer.send([FrameKind.START, self.rid, *self._start, body, more])
                self._start = None
            else:
                self.link.writer.send([FrameKind.BODY, self.rid, body, more])
        else:
            raise RuntimeError(f"an HTTP app sent {kind!r}")


class FrontLink:
    """The node's end of one front's link: each request the front forwards is answered by `app`."""

    def __init__(self, app: App, stream: trio.abc.Stream, log: logging.Logger) -> None:
        self.app = app
        self.stream = stream
        self.log = log
        self.writer = LinkWriter(stream)
        self.ready = trio.Event()  # the front said it serves
        self.scheme, self.server = "http", ("", 0)  # of every request's scope: the front says
        self._requests: dict[int, _Forwarded] = {}

    async def run(self) -> None:
        """Serve the front's requests until its link ends."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.writer.run)
            async for frame in read_frames(self.stream):
                kind, rid = frame[0], frame[1]
                if kind == FrameKind.REQUEST:
                    request = _Forwarded(self, frame)
                    self._requests[rid] = request
                    nursery.start_soon(self._answer, request)
                elif kind == FrameKind.READY:
                    self.scheme, self.server = frame[2], (str(frame[3][0]), int(frame[3][1]))
                    self.ready.set()
                elif (request_ := self._requests.get(rid)) is not None:
                    request_.hear(frame)
            nursery.cancel_scope.cancel()

    async def _answer(self, request: _Forwarded) -> None:
        try:
            await self.app(request.scope, request.receive, request.send)
        except Exception:
            scope = request.scope
            self.log.exception("HTTP app failed on %s %s", scope.get("method"), scope.get("path"))
            self.writer.send([FrameKind.FAILED, request.rid])
        finally:
            del self._requests[request.rid]


def front_command(
    name: str, fds: list[int], link_fd: int, limits: Limits, body_limit: int, tls: tuple[str, str] | None
) -> list[str]:
    """The command line of one front."""
    return [
        sys.executable,
        "-P",  # never import from the current directory (as the node itself runs)
        "-m",
        "bhandar_cli.node.http.front_process",
        *("--name", name, "--listen-fds", ",".join(map(str, fds)), "--link-fd", str(link_fd)),
        *("--limits", json.dumps(asdict(limits)), "--body-limit", str(body_limit)),
        *(("--tls-cert", tls[0], "--tls-key", tls[1]) if tls else ()),
    ]


async def serve_fronts(
    app: App,
    host: str,
    port: int,
    fronts: int,
    limits: Limits,
    body_limit: int,
    log: logging.Logger,
    node_id: str,
    tls: tuple[str, str] | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on host:port through `fronts` front processes until cancelled; reports the
    bound port once every front serves (FrontFailed if one cannot)."""
    listeners = await listen(host, port)
    fds = [listener.socket.fileno() for listener in listeners]
    part = share(limits, fronts)
    try:
        async with trio.open_nursery() as nursery:
            for index in range(1, fronts + 1):
                name = f"node {node_id} HTTP front {index}"
                await nursery.start(_keep_front, app, name, fds, part, body_limit, log, tls)
            log.info(
                "node %s: %d HTTP fronts serve port %d", node_id, fronts, listeners[0].socket.getsockname()[1]
            )
            task_status.started(listeners[0].socket.getsockname()[1])
    finally:
        for listener in listeners:
            listener.socket.close()


async def _keep_front(
    app: App,
    name: str,
    fds: list[int],
    limits: Limits,
    body_limit: int,
    log: logging.Logger,
    tls: tuple[str, str] | None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run one front, and another each time it exits; report when the first serves."""
    first = True
    while True:
        ours, theirs = socket.socketpair()
        try:
            command = front_command(name, fds, theirs.fileno(), limits, body_limit, tls)
            process = await trio.lowlevel.open_process(
                command, pass_fds=(*fds, theirs.fileno()), stdin=subprocess.DEVNULL
            )
        finally:
            theirs.close()
        link = FrontLink(app, trio.SocketStream(trio.socket.from_stdlib_socket(ours)), log)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_run_link, link, nursery.cancel_scope)
                if first:
                    await link.ready.wait()
                    first = False
                    task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                await link.stream.aclose()
                with trio.move_on_after(STOP_S):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
        if not link.ready.is_set():
            raise FrontFailed(
                f"{name} exited before it served (status {process.returncode}): its error is in the log above"
            )
        log.error("%s exited (status %s): starting another in %g s", name, process.returncode, RESTART_S)
        await trio.sleep(RESTART_S)


async def _run_link(link: FrontLink, done: trio.CancelScope) -> None:
    """Serve the link until the front closes it; then the front's life is over."""
    try:
        await link.run()
    except* LinkBroken as broken:
        link.log.error("an HTTP front's link broke: %s", broken.exceptions[0])
    finally:
        done.cancel()
