"""One HTTP front: a process a node starts (node/http/fronts.py) to hold HTTP connections on the
node's port in front of it, and the entry point it runs (`python -m bhandar_cli.node.http.front_process`).

A front accepts on the listening sockets the node opened and handed it, and does everything the
node's own process does for a connection (node/http/asgi.py and http1.py: TLS, h11, the connection
caps, the unauthenticated budget, every deadline), with `Forwarder` as its app: each request goes
over the link (node/http/front_link.py) to the node, whose API app answers it. So TLS and HTTP
parsing run on another core than the node's loop, and the node sees requests already parsed.

A front reads a request's body of a size the node takes before it forwards the request (usually
it came with the head), so the request and its body cross the link in one frame, as the answer
does: a request costs the node one frame in and one out. Any other body (chunked, over the limit,
or behind `Expect: 100-continue`) is read when the node's app asks for it, as in the node's own
process. A front holds its share of the node's connection caps (`share`). It lives as long as its link:
when the node goes (stopped or killed), the link closes and the front exits.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import socket
import sys

import trio

from bhandar_cli.node.http.asgi import ADMIT, Admit, Limits, serve_listeners
from bhandar_cli.node.http.front_link import (
    Frame,
    FrameKind,
    LinkBroken,
    LinkWriter,
    read_frames,
)
from bhandar_cli.node.http.http1 import Receive, Scope, Send

log = logging.getLogger("bhandar.http.front")


class NodeAppFailed(Exception):
    """The node's app raised on a forwarded request (a bug; the node's log has its traceback)."""


def share(limits: Limits, fronts: int) -> Limits:
    """One front's part of the node's connection caps: each cap divided among `fronts`, rounded
    up, so the node as a whole holds what one process would (within `fronts` - 1)."""

    def part(cap: int | None) -> int | None:
        return None if cap is None else max(1, math.ceil(cap / fronts))

    return Limits(
        max_connections=part(limits.max_connections) or 1,
        read_timeout=limits.read_timeout,
        unauthenticated=part(limits.unauthenticated),
        per_token=part(limits.per_token),
    )


class Forwarder:
    """The ASGI app of a front: hands each request to the node over the link and sends back what
    the node answers; asks the connection's door when the node asks to admit a token."""

    def __init__(self, writer: LinkWriter, body_limit: int) -> None:
        self.writer = writer
        self.body_limit = body_limit  # past it the node refuses the body (413): no more is read
        self._ids = itertools.count(1)
        self._waiting: dict[int, trio.MemorySendChannel[Frame]] = {}

    async def read_link(self, stream: trio.abc.Stream) -> None:
        """Hand each frame from the node to the request it is about, until the node closes the link."""
        async for frame in read_frames(stream):
            inbox = self._waiting.get(frame[1])
            if inbox is not None:  # else the request is over (its client left): dropped
                inbox.send_nowait(frame)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, more, pumped, cut = b"", False, False, False
        inline = self._inline(scope["headers"])
        if inline is None:  # a body the node asks for (FrameKind.READ) when its app reads it
            more = True
        elif inline:  # usually the whole body, come in the read that brought the head
            first = await receive()
            cut = first["type"] != "http.request"  # gone, or silent past the read timeout
            body, more = bytes(first.get("body", b"")), cut or bool(first.get("more_body", False))
            pumped = True
        rid = next(self._ids)
        inbox_in, inbox = trio.open_memory_channel[Frame](math.inf)
        self._waiting[rid] = inbox_in
        admission: Admit = scope[ADMIT]
        answered = False
        watched = False  # something reads on, to tell the node when the client goes: the pump or a watch
        try:
            self.writer.send(
                [
                    FrameKind.REQUEST,
                    rid,
                    scope["method"],
                    scope["path"],
                    scope["raw_path"],
                    scope["query_string"],
                    scope["headers"],
                    scope["http_version"],
                    scope["client"],
                    admission.admitted,
                    body,
                    more,
                ]
            )
            if cut:  # the node's app hears the body cut, and answers as it would in one process
                self.writer.send([FrameKind.GONE, rid])
            async with trio.open_nursery() as nursery:
                if more and pumped and not cut:
                    watched = True
                    nursery.start_soon(self._pump_body, rid, receive, len(body))
                async for frame in inbox:
                    kind = frame[0]
                    if kind == FrameKind.START:  # [FrameKind.START, id, status, headers, body, more]
                        headers = [(bytes(name), bytes(value)) for name, value in frame[3]]
                        await send({"type": "http.response.start", "status": frame[2], "headers": headers})
                        kind, frame = FrameKind.BODY, [FrameKind.BODY, rid, frame[4], frame[5]]
                    if kind == FrameKind.BODY:
                        await send({"type": "http.response.body", "body": frame[2], "more_body": frame[3]})
                        if not frame[3]:
                            break
                        # A streaming response: the node hears when its client goes. Not while a
                        # body is left that the node has not asked for: the next read is that body,
                        # which the pump (on FrameKind.READ) forwards; one reader per connection.
                        # Until then a client that left shows as a failed send.
                        if not watched and not (more and not pumped):
                            watched = True
                            nursery.start_soon(self._watch_client, rid, receive)
                    elif kind == FrameKind.ADMIT:
                        self.writer.send(await self._admit(admission, rid, frame[2]))
                    elif kind == FrameKind.READ and not pumped:
                        pumped = watched = True
                        nursery.start_soon(self._pump_body, rid, receive, 0)
                    elif kind == FrameKind.FAILED:
                        raise NodeAppFailed(f"the node's app failed on request {rid}: see the node's log")
                answered = True
                nursery.cancel_scope.cancel()
        finally:
            del self._waiting[rid]
            if not answered:  # the client left, or this front is stopping: the node can stop too
                self.writer.send([FrameKind.GONE, rid])

    def _inline(self, headers: list[tuple[bytes, bytes]]) -> bool | None:
        """Whether the request frame carries the body: False, there is none; True, a body of a
        size the node takes and no `Expect: 100-continue` (read it, then forward); None: the node
        asks for it when its app reads it (a chunked body, one over the limit, one waiting for
        `100 Continue`, which is said only when the app reads, as the node itself does)."""
        length: int | None = 0
        for name, value in headers:
            if name == b"content-length":
                length = int(value) if value.isdigit() else None
            elif name == b"transfer-encoding" or (name == b"expect" and value.lower() == b"100-continue"):
                return None
        if length is None or length > self.body_limit:
            return None
        return length > 0

    async def _admit(self, admission: Admit, rid: int, token: str) -> Frame:
        from bhandar_cli.core.model import BhandarError, RateLimited

        try:
            await admission(token)
        except BhandarError as exc:
            retry = exc.retry_after if isinstance(exc, RateLimited) else 0.0
            return [FrameKind.NOT_ADMITTED, rid, exc.code, str(exc), retry]
        return [FrameKind.ADMITTED, rid]

    async def _pump_body(self, rid: int, receive: Receive, taken: int) -> None:
        """Forward the rest of the request's body as it comes (up to just past `body_limit`, which
        the node refuses), then wait for the client to leave."""
        while taken <= self.body_limit:
            message = await receive()
            if message["type"] != "http.request":
                self.writer.send([FrameKind.GONE, rid])
                return
            body = bytes(message.get("body", b""))
            taken += len(body)
            self.writer.send([FrameKind.BODY, rid, body, bool(message.get("more_body", False))])
            if not message.get("more_body", False):
                await self._watch_client(rid, receive)
                return

    async def _watch_client(self, rid: int, receive: Receive) -> None:
        """Tell the node when the client goes (what an app streaming its response hears as
        `http.disconnect`); cancelled when the response is over."""
        await receive()
        self.writer.send([FrameKind.GONE, rid])


async def run_front(
    listeners: list[trio.SocketListener],
    link: trio.abc.Stream,
    limits: Limits,
    body_limit: int,
    tls: tuple[str, str] | None,
) -> None:
    """Serve the node's port through `link` until the node closes it."""
    writer = LinkWriter(link)
    forwarder = Forwarder(writer, body_limit)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run)
        await nursery.start(
            serve_listeners, forwarder, listeners, limits, logging.getLogger("bhandar.http"), tls
        )
        scheme = "https" if tls else "http"
        writer.send([FrameKind.READY, 0, scheme, list(listeners[0].socket.getsockname()[:2])])
        await forwarder.read_link(link)
        nursery.cancel_scope.cancel()


def _listener(fd: int) -> trio.SocketListener:
    sock = socket.socket(fileno=fd)
    return trio.SocketListener(trio.socket.from_stdlib_socket(sock))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bhandar-http-front", description="One HTTP front of a node.")
    parser.add_argument("--name", required=True, help="The node's id and this front's number (for the log).")
    parser.add_argument("--listen-fds", required=True, help="The node's listening sockets, comma-separated.")
    parser.add_argument(
        "--link-fd", type=int, required=True, help="This front's end of its link to the node."
    )
    parser.add_argument("--limits", required=True, help="This front's connection caps, as JSON.")
    parser.add_argument("--body-limit", type=int, required=True)
    parser.add_argument("--tls-cert", default="")
    parser.add_argument("--tls-key", default="")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(asctime)s %(levelname)s {args.name} %(name)s: %(message)s",
    )
    limits = Limits(**json.loads(args.limits))
    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None

    async def body() -> None:
        listeners = [_listener(int(fd)) for fd in args.listen_fds.split(",")]
        link = trio.SocketStream(trio.socket.from_stdlib_socket(socket.socket(fileno=args.link_fd)))
        await run_front(listeners, link, limits, args.body_limit, tls)

    try:
        trio.run(body)
    except* LinkBroken:  # the node went mid-frame: nothing to answer with
        log.info("%s: the link to the node broke: stopping", args.name)
    except* KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
