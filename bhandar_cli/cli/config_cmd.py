"""`bhandar config set KEY VALUE` and `bhandar config show`: the cluster configuration of a running
process cluster (client/procedures/config_rollout.py). A change is rolled out one node at a time,
each watched before the next; progress (node, phase, seconds) goes to stderr as it happens (on a
terminal, one line per node that its phases overwrite), the report to stdout.

Exit codes: 0 ok, 1 failed (the rollout stopped at a node and rolled it back, a node is down, the
cluster is unavailable), 2 usage (an unknown key or a bad value: nothing changed).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import typer

from bhandar_cli.cli.output import CLUSTER_OPTION, OUTPUT_OPTION, fail
from bhandar_cli.client import EXIT_USAGE, OutputFormat

if TYPE_CHECKING:
    from bhandar_cli.client import Client, TcpBackend

config_app = typer.Typer(
    help="Show the cluster configuration, or change it one node at a time.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@config_app.command("set")
def set_(
    key: str = typer.Argument(..., metavar="KEY", help="A key of `bhandar config show`."),
    value: str = typer.Argument(..., metavar="VALUE", help="Its new value (seconds, a number, on/off)."),
    window: float = typer.Option(
        2.0, "--window", metavar="SECONDS", help="Health measured before and after each node takes it."
    ),
    cluster: str | None = CLUSTER_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Roll a new value out node by node: each node's errors, p99 and peers are measured before and
    after it takes the value; a regression puts that node and those before it back and stops, so
    a bad value never reaches every node. The cluster file keeps the result (restarted nodes come
    back with it)."""
    from bhandar_cli.core.model import BadInput, parse_setting
    from bhandar_cli.repl import node_progress

    try:
        parse_setting(key, value)  # a bad key or value: a usage error, before any connection
    except BadInput as exc:
        fail(str(exc), EXIT_USAGE)
    if not 0.1 <= window <= 600:
        fail(f"--window must be 0.1 to 600 seconds (got {window:g})", EXIT_USAGE)

    async def rollout(client: Client[TcpBackend]) -> Any:
        with node_progress(sys.stderr) as progress:
            return await client.admin.config_set(key, value, progress, window)

    _run("config set", output, cluster, rollout)


@config_app.command("show")
def show(cluster: str | None = CLUSTER_OPTION, output: OutputFormat = OUTPUT_OPTION) -> None:
    """Each node's configuration version and values, and whether they all agree."""
    _run("config show", output, cluster, lambda c: c.admin.config_show())


def _run(
    cmd: str,
    output: OutputFormat,
    cluster: str | None,
    action: Callable[[Client[TcpBackend]], Awaitable[Any]],
) -> None:
    from bhandar_cli.cli.cluster_cmd import _print, on_cluster
    from bhandar_cli.repl import render_config

    data = on_cluster(cmd, output, cluster, action)
    if data is not None:
        _print(render_config(data))
