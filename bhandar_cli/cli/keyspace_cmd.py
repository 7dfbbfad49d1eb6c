"""`bhandar keyspace create|list`: define keyspaces on a running process cluster, and list them.

A keyspace must be created before any get, put, delete or incr uses it (`kv` and `counters` exist
from the start). Exit codes: 0 ok (created, or an identical keyspace exists), 1 failed (a
keyspace of that name is defined otherwise, too many keyspaces, cluster unavailable), 2 usage (a
bad name, policy, n, quorum mode or ttl).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import typer

from bhandar_cli.cli.output import CLUSTER_OPTION, OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_USAGE, OutputFormat, exit_code
from bhandar_cli.core.model import KEYSPACE_NAME_RULE

if TYPE_CHECKING:
    from bhandar_cli.client import Client, TcpBackend

keyspace_app = typer.Typer(
    help="Create and list keyspaces (a keyspace must be created before it is used).",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@keyspace_app.command("create")
def create(
    name: str = typer.Argument(..., metavar="NAME", help=f"{KEYSPACE_NAME_RULE}."),
    policy: str = typer.Option(
        "siblings", "--policy", help="siblings (keep concurrent writes), lww (last write wins) or counter."
    ),
    n: int | None = typer.Option(
        None, "--n", "-n", metavar="N", help="Replication factor (default: the cluster's)."
    ),
    quorum: str = typer.Option(
        "sloppy", "--quorum", help="sloppy (fallbacks stand in for down replicas) or strict."
    ),
    ttl: str = typer.Option(
        "0",
        "--ttl",
        metavar="TTL",
        help="Values expire this long after their write: 60s, 5m, 2h, 1d (policy lww only; default never).",
    ),
    cluster: str | None = CLUSTER_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Create a keyspace (exit 0 too when an identical one exists)."""
    _run("keyspace", output, cluster, lambda c: c.admin.keyspace_create(name, policy, n, quorum, ttl))


@keyspace_app.command("list")
def list_(cluster: str | None = CLUSTER_OPTION, output: OutputFormat = OUTPUT_OPTION) -> None:
    """List every keyspace with its policy, replication factor, quorum mode and ttl."""
    _run("keyspace", output, cluster, lambda c: c.views.keyspace_list())


def _run(
    cmd: str,
    output: OutputFormat,
    cluster: str | None,
    action: Callable[[Client[TcpBackend]], Awaitable[Any]],
) -> None:
    from bhandar_cli.cli.cluster_cmd import run_async
    from bhandar_cli.client import open_tcp_client
    from bhandar_cli.core.model import BadInput, ClientError
    from bhandar_cli.repl import Reply, make_consoles, print_reply

    async def body() -> Any:
        async with open_tcp_client(cluster) as client:
            try:
                return await action(client)
            except (ClientError, BadInput) as exc:
                return exc

    result = run_async(cmd, output, body)
    if isinstance(result, BadInput | ClientError):
        error = result if isinstance(result, ClientError) else ClientError(result.code, str(result))
        if output is OutputFormat.json:
            emit_json(error.to_json(cmd))
        # A definition refused before it reached the cluster is a usage error; the cluster's
        # answers (defined otherwise, too many keyspaces) are failed operations.
        fail(str(error), EXIT_USAGE if isinstance(result, BadInput) else exit_code(error.code))
    if output is OutputFormat.json:
        emit_json(result)
    else:
        out, _ = make_consoles()
        print_reply(out, Reply(cmd, True, result), "table")
