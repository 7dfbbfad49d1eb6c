"""`bhandar cluster upgrade [--to N]`: the rolling upgrade of a process cluster
(client/procedures/upgrade.py), with its progress on stderr as it goes (on a terminal, one line per
node that its phases overwrite) and its report on stdout."""

from __future__ import annotations

import sys
from typing import Any

import typer

from bhandar_cli.cli.cluster_cmd import DIR_OPTION, _print, run_async
from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_USAGE, OutputFormat
from bhandar_cli.node.net import MIN_COMPATIBLE_VERSION, PROTOCOL_VERSION, PROTOCOLS


def upgrade(
    to: int | None = typer.Option(
        None, "--to", metavar=PROTOCOLS, help="Wire protocol to move every node to (default: restart only)."
    ),
    directory: str | None = DIR_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Upgrade one node at a time: stop it cleanly (it drains its requests), start it again (at
    protocol --to), and wait until it serves before the next. Refuses a step that would leave two
    replicas of a key down; progress (node, phase, seconds) goes to stderr."""
    from bhandar_cli.client import open_tcp_client
    from bhandar_cli.repl import node_progress, render_upgrade

    if to is not None and not MIN_COMPATIBLE_VERSION <= to <= PROTOCOL_VERSION:
        fail(f"--to must be {MIN_COMPATIBLE_VERSION}..{PROTOCOL_VERSION} (got {to})", EXIT_USAGE)

    async def body() -> Any:
        async with open_tcp_client(directory) as client:
            with node_progress(sys.stderr) as progress:
                return await client.admin.upgrade(to, progress)

    data = run_async("cluster upgrade", output, body)
    if output is OutputFormat.json:
        emit_json(data)
        return
    _print(render_upgrade(data))
