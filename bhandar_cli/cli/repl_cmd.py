"""`bhandar repl`: the REPL on an in-process cluster, interactive on a terminal, else batch."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from bhandar_cli.cli.in_process_options import DATA_DIR, NODES, REPLICAS, SEED, VNODES, ZONES, cluster_options
from bhandar_cli.cli.output import OUTPUT_OPTION, fail
from bhandar_cli.client import EXIT_FAILED, EXIT_USAGE, OutputFormat
from bhandar_cli.core.model import BhandarError


def repl(
    nodes: int = NODES,
    zones: int = ZONES,
    vnodes: int = VNODES,
    replicas: int = REPLICAS,
    seed: int = SEED,
    data_dir: Path | None = DATA_DIR,
    connect: Path | None = typer.Option(
        None, "--connect", metavar="DIR", help="Open the REPL on the running process cluster of DIR."
    ),
    script: Path | None = typer.Option(None, "--script", help="Run the commands of FILE, one per line."),
    execute: str | None = typer.Option(None, "-e", "--execute", help="Run these commands ('cmd; cmd')."),
    output: OutputFormat = OUTPUT_OPTION,
    keep_going: bool = typer.Option(
        False,
        "--keep-going/--fail-fast",
        help="After a failed command, run the rest of the script too (exit 1 if any failed); "
        "--fail-fast, the default, stops at the first.",
    ),
    virtual_time: bool = typer.Option(
        False, "--virtual-time", help="Run on a virtual clock: sleeps and timeouts take no real time."
    ),
) -> None:
    """Open the REPL on an in-process cluster (batch mode when input is not a terminal)."""
    options = cluster_options(nodes, zones, vnodes, replicas, seed, data_dir, connect)
    if script is not None and not script.is_file():
        fail(f"no such script file: {script}", EXIT_USAGE)
    from bhandar_cli.fleet import ClusterFileError
    from bhandar_cli.repl import open_session, run_batch
    from bhandar_cli.web import serve_in_background

    if connect is not None:
        if virtual_time:
            fail("--virtual-time applies to in-process clusters, not to --connect", EXIT_USAGE)
        from bhandar_cli.repl import open_tcp_session

        def opener() -> Any:
            return open_tcp_session(connect, output.value, serve_in_background)
    else:

        def opener() -> Any:
            return open_session(options, output.value, serve_in_background)

    batch = script is not None or execute is not None or not sys.stdin.isatty()
    try:
        if batch:
            code = run_batch(opener, str(script) if script else None, execute, keep_going, virtual_time)
        else:
            from bhandar_cli.repl import run_interactive

            code = run_interactive(opener, virtual_time)
    except (BhandarError, ClusterFileError) as exc:  # e.g. no cluster to connect to
        fail(str(exc), EXIT_FAILED)
    raise typer.Exit(code)
