"""An ASGI app served on 127.0.0.1 as a node serves HTTP: in this process (asgi.serve), or through
an HTTP front (node/http/fronts.py: the front's Forwarder and the node's FrontLink over a link in
memory), for tests that check both ways keep the same behaviour and limits."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import trio
import trio.testing

from bhandar_cli.node.http import Limits, asgi
from bhandar_cli.node.http.front_process import run_front
from bhandar_cli.node.http.fronts import FrontLink
from bhandar_cli.node.http.http1 import App

WAYS = ["in the node's process", "through a front"]  # the ids of a test's two runs


@asynccontextmanager
async def http_serving(app: App, limits: Limits, tls: tuple[str, str] | None, way: str) -> AsyncIterator[int]:
    """Serve `app` the `way` named (one of WAYS) until the block ends; yields the port."""
    log = logging.getLogger("test")
    async with trio.open_nursery() as nursery:
        if way == WAYS[0]:
            yield await nursery.start(partial(asgi.serve, app, "127.0.0.1", 0, limits, log, tls))
        else:
            listeners = await asgi.listen("127.0.0.1", 0)
            front_end, node_end = trio.testing.memory_stream_pair()
            link = FrontLink(app, node_end, log)
            nursery.start_soon(link.run)
            nursery.start_soon(run_front, listeners, front_end, limits, 1 << 20, tls)
            await link.ready.wait()
            yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()
