"""The REPL's `web` command: serve the web view of the session's cluster in the background.

The server runs as a trio system task, so it outlives the command that started it and stops with
the session's trio run; it never raises into the session (a failure to bind is the command's
error, a failure later is logged).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from bhandar_cli.core.model import BadInput

if TYPE_CHECKING:
    from bhandar_cli.repl import Session

HOST = "127.0.0.1"
log = logging.getLogger("bhandar.web")


async def serve_in_background(session: Session, port: int) -> dict[str, Any]:
    """Start serving (once per session) and answer the page's address."""
    from bhandar_cli.web.server import WebServer

    if session.web is not None and session.web.port is not None:
        return _answer(session, session.web.port, already=True)
    server = WebServer(session)
    ready = trio.Event()
    failed: list[BaseException] = []

    async def run() -> None:
        try:
            with server.scope:
                async with trio.open_nursery() as nursery:
                    await nursery.start(server.serve, HOST, port)
                    ready.set()
        except Exception as exc:  # a system task must not raise: that would end the whole run
            failed.append(exc)
            if ready.is_set():
                log.warning("web view stopped: %s", exc)
        finally:
            session.observers.remove(server.state.observe)
            if session.web is server:
                session.web = None
            ready.set()
            server.finished.set()

    trio.lowlevel.spawn_system_task(run)
    await ready.wait()
    if failed or server.port is None:
        raise BadInput(f"cannot serve on {HOST}:{port}: {_reason(failed)} (web port=0 picks a free port)")
    session.web = server
    return _answer(session, server.port)


async def stop_serving(session: Session) -> None:
    """Stop the page started by `serve_in_background` (its open pages are told to reconnect),
    before the session's cluster stops under it."""
    server = session.web
    if server is None:
        return
    server.scope.cancel()
    await server.finished.wait()


def _answer(session: Session, port: int, already: bool = False) -> dict[str, Any]:
    url = f"http://{HOST}:{port}/"
    return {
        "cmd": "web",
        "ok": True,
        "url": url,
        "port": port,
        "trace": session.client.data.trace,
        "already": already,
    }


def _reason(failed: list[BaseException]) -> str:
    for exc in failed:
        found = exc
        while isinstance(found, BaseExceptionGroup) and found.exceptions:
            found = found.exceptions[0]
        if isinstance(found, OSError):
            return found.strerror or str(found)
        return str(found)
    return "it stopped at once"
