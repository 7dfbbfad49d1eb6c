"""`bhandar web`: the REPL session of `bhandar repl` (or `repl --connect DIR`) with the live web view.

On a terminal the REPL runs as usual while the page is served; otherwise commands read from
standard input run in the session, and the page is served until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from bhandar_cli.cli.in_process_options import DATA_DIR, NODES, REPLICAS, SEED, VNODES, ZONES, cluster_options
from bhandar_cli.cli.output import fail
from bhandar_cli.client import EXIT_FAILED, EXIT_USAGE
from bhandar_cli.core.model import BhandarError

DEFAULT_PORT = 8700


def web(
    port: int = typer.Option(DEFAULT_PORT, "--port", "-p", help="Port of the page (0: any free port)."),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="Loopback address to listen on (127.0.0.1, localhost or ::1): the page runs commands.",
    ),
    open_browser: bool = typer.Option(False, "--open", help="Open the page in the default browser."),
    nodes: int = NODES,
    zones: int = ZONES,
    vnodes: int = VNODES,
    replicas: int = REPLICAS,
    seed: int = SEED,
    data_dir: Path | None = DATA_DIR,
    connect: Path | None = typer.Option(
        None, "--connect", metavar="DIR", help="Show the running process cluster of DIR instead."
    ),
    trace: bool = typer.Option(
        True, "--trace/--no-trace", help="Trace data commands, so the page draws their messages."
    ),
) -> None:
    """Serve a live web view of an in-process cluster (or --connect DIR) next to its REPL."""
    if not 0 <= port <= 65535:
        fail(f"--port must be between 0 and 65535 (got {port})", EXIT_USAGE)
    from bhandar_cli.node import is_loopback

    if not is_loopback(host):
        fail(
            f"--host {host} is not a loopback address: the page runs commands with this session's "
            "rights, so it is served on 127.0.0.1, localhost or ::1 only",
            EXIT_USAGE,
        )
    options = cluster_options(nodes, zones, vnodes, replicas, seed, data_dir, connect)
    from bhandar_cli.fleet import ClusterFileError
    from bhandar_cli.repl import open_session
    from bhandar_cli.web import serve_in_background

    if connect is not None:
        from bhandar_cli.repl import open_tcp_session

        def opener() -> Any:
            return open_tcp_session(connect, serve_web=serve_in_background)
    else:

        def opener() -> Any:
            return open_session(options, serve_web=serve_in_background)

    try:
        code = _run(opener, host, port, open_browser, trace)
    except OSError as exc:  # the port is taken, or the address is not ours
        fail(f"cannot serve on {host}:{port}: {exc.strerror or exc} (--port picks another)", EXIT_FAILED)
    except (BhandarError, ClusterFileError) as exc:
        fail(str(exc), EXIT_FAILED)
    raise typer.Exit(code)


def _run(opener: Any, host: str, port: int, open_browser: bool, trace: bool) -> int:
    import signal

    import trio

    from bhandar_cli.core.model import sole_exception
    from bhandar_cli.web import WebServer

    async def main() -> int:
        async with opener() as session, trio.open_nursery() as nursery:
            session.client.data.trace = trace
            server = WebServer(session)
            session.web = server
            bound = await nursery.start(server.serve, host, port)
            url = f"http://{f'[{host}]' if ':' in host else host}:{bound}/"
            print(f"web view at {url} (Ctrl-C stops)", flush=True)
            if open_browser:
                import webbrowser

                await trio.to_thread.run_sync(webbrowser.open, url)
            if sys.stdin.isatty():
                from bhandar_cli.repl import InteractiveApp

                code = await InteractiveApp(session).run()
            else:
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    nursery.start_soon(_stdin_commands, server)
                    async for _ in signals:
                        break
                code = 0
            nursery.cancel_scope.cancel()
            return code

    try:
        return trio.run(main)
    except BaseExceptionGroup as group:
        sole = sole_exception(group)
        if sole is group:
            raise
        raise sole from None


async def _stdin_commands(server: Any) -> None:
    """Each line of standard input runs in the session, echoed as the page's commands are; at its
    end the page goes on being served."""
    import trio

    while True:
        line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        if line == "":
            return
        if line.strip() and not line.lstrip().startswith("#"):
            await server.command(line.strip(), source="stdin")
