"""`bhandar repl`: the REPL on an in-process cluster, interactive on a terminal, else batch."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from bhandar_cli.cmd.output import EXIT_FAILED, EXIT_USAGE, OUTPUT_OPTION, OutputFormat, fail
from bhandar_cli.core.errors import BhandarError


def repl(
    nodes: int = typer.Option(5, "--nodes", "-n", help="Number of nodes (A, ..., Z, AA, AB, ...), 1 to 240."),
    zones: int = typer.Option(3, "--zones", help="Zones z1, z2, ... assigned round-robin."),
    vnodes: int = typer.Option(8, "--vnodes", help="Tokens (virtual nodes) per node."),
    replicas: int = typer.Option(3, "--replicas", help="Replication factor N of new keyspaces."),
    seed: int = typer.Option(0, "--seed", help="Seed of the network's latency randomness."),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="Keep the nodes' data in DIR between runs (default: a temporary directory)."
    ),
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
    from bhandar_cli.node.cluster import MAX_NODES

    if not 1 <= nodes <= MAX_NODES:
        fail(f"--nodes must be between 1 and {MAX_NODES} (got {nodes})", EXIT_USAGE)
    if not 1 <= zones <= nodes:
        fail(f"--zones must be between 1 and the number of nodes (got {zones})", EXIT_USAGE)
    if not 1 <= vnodes <= 1024:
        fail(f"--vnodes must be between 1 and 1024 (got {vnodes})", EXIT_USAGE)
    if not 1 <= replicas <= min(nodes, 9):
        fail(f"--replicas must be between 1 and min(nodes, 9) (got {replicas})", EXIT_USAGE)
    if script is not None and not script.is_file():
        fail(f"no such script file: {script}", EXIT_USAGE)
    if data_dir is not None and connect is None:
        _check_stored_nodes(str(data_dir), nodes)
    from bhandar_cli.node.clusterfile import ClusterFileError
    from bhandar_cli.repl.batch import ClusterOptions, open_session, run_batch

    if connect is not None:
        if virtual_time:
            fail("--virtual-time applies to in-process clusters, not to --connect", EXIT_USAGE)
        from bhandar_cli.cmd.cluster import open_tcp_session

        def opener() -> Any:
            return open_tcp_session(connect, output.value)
    else:
        options = ClusterOptions(nodes, zones, vnodes, replicas, seed, str(data_dir) if data_dir else None)

        def opener() -> Any:
            return open_session(options, output.value)

    batch = script is not None or execute is not None or not sys.stdin.isatty()
    try:
        if batch:
            code = run_batch(opener, str(script) if script else None, execute, keep_going, virtual_time)
        else:
            from bhandar_cli.repl.app import run_interactive

            code = run_interactive(opener, virtual_time)
    except (BhandarError, ClusterFileError) as exc:  # e.g. no cluster to connect to
        fail(str(exc), EXIT_FAILED)
    raise typer.Exit(code)


def _check_stored_nodes(data_dir: str, nodes: int) -> None:
    from bhandar_cli.node.storage import node_set_mismatch

    wrong = node_set_mismatch(
        data_dir, nodes, data_dir, "start the first nodes with --nodes, then `add` the others"
    )
    if wrong:
        fail(wrong, EXIT_USAGE)
