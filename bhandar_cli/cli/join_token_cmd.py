"""`bhandar cluster join-token create`: a single-use token that lets a node on another machine join.

Parsing and rendering only: a node of the cluster mints the token (node/join.py, RPC `join_token`)
and this prints it with the `bhandar node run --join` command to run on the new machine, which
takes the token from $BHANDAR_JOIN_TOKEN (or --token-file), never from its own arguments: any
local user can read a process's command line, only its owner its environment.
"""

from __future__ import annotations

import datetime
from typing import Any

import typer

from bhandar_cli.cli.cluster_cmd import DIR_OPTION, run_async
from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_USAGE, OutputFormat
from bhandar_cli.security import JOIN_TOKEN_ENV

join_token_app = typer.Typer(
    help="Single-use tokens that let a node on another machine join the cluster.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@join_token_app.command("create")
def create(
    via: str | None = typer.Option(
        None,
        "--via",
        metavar="NODE",
        help="Node that issues the token, one holding the CA key (default: the first such node running).",
    ),
    ttl: str = typer.Option("15m", "--ttl", help="How long it is valid: 90s, 15m, 2h, 1d (at most 7d)."),
    directory: str | None = DIR_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Mint a join token on a node holding the cluster CA key, and print the command for the new machine."""
    from bhandar_cli.security import parse_ttl

    try:
        seconds = parse_ttl(ttl)
    except ValueError as exc:
        fail(f"--ttl: {exc}", EXIT_USAGE)

    async def body() -> dict[str, Any]:
        import trio

        from bhandar_cli.core.model import BadInput, Refused, Unavailable
        from bhandar_cli.fleet import ClusterFileError, client_access, load, pid_alive, resolve_dir
        from bhandar_cli.host import next_node_name
        from bhandar_cli.node.net import RpcError, rpc_once

        cluster = load(resolve_dir(directory))
        if via is not None:
            try:
                entry = cluster.node(via)
            except ClusterFileError as exc:
                raise BadInput(str(exc)) from None
        else:
            running = [n for n in cluster.nodes if n.id in cluster.issuing and pid_alive(n.pid)]
            if not running:
                raise Unavailable(
                    f"no node that signs certificates ({', '.join(cluster.issuing)}) is running: start "
                    f"it (bhandar cluster start {cluster.issuing[0]} --dir {cluster.dir})"
                )
            entry = running[0]
        reach = client_access(cluster)
        try:
            answer = await rpc_once(entry.host, entry.port, "join_token", 5.0, entry.id, reach, ttl=seconds)
            members = await rpc_once(entry.host, entry.port, "members", 5.0, entry.id, reach)
        except (RpcError, trio.TooSlowError) as exc:
            raise Unavailable(str(exc) or f"node {entry.id} did not answer") from None
        if "refused" in answer:
            others = [i for i in cluster.issuing if i != entry.id]
            hint = f"; --via {others[0]} can" if others else ""
            raise Refused(f"node {entry.id} cannot issue join tokens: {answer['refused']}{hint}")
        new_id = next_node_name([*cluster.names, *(str(m["id"]) for m in members)])
        options = (
            ""
            if (cluster.vnodes, cluster.replicas) == (8, 3)
            else (f" --vnodes {cluster.vnodes} --replicas {cluster.replicas}")
        )
        # The token goes in the command's environment: its arguments are on view to every local user.
        command = (
            f"{JOIN_TOKEN_ENV}={answer['token']} bhandar node run --join {entry.address} --id {new_id} "
            f"--host ADDRESS --data-dir bhandar-{new_id}{options}"
        )
        expires = datetime.datetime.fromtimestamp(answer["expires"], datetime.UTC)
        return {
            "cmd": "cluster join-token create",
            "ok": True,
            "via": entry.id,
            "address": entry.address,
            "token": answer["token"],
            "expires": answer["expires"],
            "expires_at": expires.isoformat(timespec="seconds"),
            "id": new_id,
            "command": command,
            "token_env": JOIN_TOKEN_ENV,
        }

    data = run_async("cluster join-token create", output, body)
    if output is OutputFormat.json:
        emit_json(data)
        return
    at = data["expires_at"].replace("T", " ").replace("+00:00", " UTC")
    typer.echo(f"join token from node {data['via']}, for one node, valid until {at}:\n  {data['token']}")
    typer.echo("on the new machine run (ADDRESS: its address the cluster can reach):")
    typer.echo(f"  {data['command']}")
    typer.echo(f"(or put the token in a file, mode 0600, and give --token-file FILE for ${JOIN_TOKEN_ENV})")
