"""`bhandar cluster token create|list|revoke`: access tokens of a running process cluster.

The token is minted here (security/auth.py) and only its record (id, hash, grants, rate) goes to a
node, over the admin RPC: an issuing node, which seals it with the CA key (other nodes take token
records from gossip only so sealed); gossip takes it to the others. Every subcommand needs an admin token
(from $BHANDAR_TOKEN, else the cluster file).
"""

from __future__ import annotations

import datetime
import sys
from typing import Any

import typer

from bhandar_cli.cli.cluster_cmd import DIR_OPTION, _print, run_async
from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_USAGE, OutputFormat

token_app = typer.Typer(
    help="Access tokens: create one with a role on a keyspace, list them, revoke one (admin only).",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


async def _admin_call(directory: str | None, op: str, **args: Any) -> Any:
    """One admin RPC, to an issuing node first (token changes are sealed with the CA key)."""
    from bhandar_cli.client import open_tcp_backend
    from bhandar_cli.fleet import resolve_dir

    async with open_tcp_backend(resolve_dir(directory)) as backend:
        return (await backend.on_issuer(op, **args))[1]


@token_app.command("create")
def create(
    keyspace: str = typer.Option(..., "--keyspace", "-k", metavar="KS", help="Keyspace, or * for all."),
    role: str = typer.Option(..., "--role", "-r", help="read, write or admin (each allows the ones before)."),
    rate: float = typer.Option(0.0, "--rate", help="Requests per second on each node (0: no limit)."),
    burst: int = typer.Option(0, "--burst", help="Requests at once past the rate (0: one second's worth)."),
    directory: str | None = DIR_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Create a token; it is printed once, and only its hash is kept. Returns once every live node
    knows it (up to 10 s; past that, a warning names the nodes that do not know it yet)."""
    import time

    from bhandar_cli.client import TokenCreated, create_token
    from bhandar_cli.core import to_wire
    from bhandar_cli.core.model import BadInput
    from bhandar_cli.security import mint

    if rate < 0 or burst < 0:
        fail("--rate and --burst must be zero or more", EXIT_USAGE)
    try:
        token, record = mint({keyspace: role}, rate, burst, time.time())
    except BadInput as exc:
        fail(str(exc), EXIT_USAGE)

    async def body() -> TokenCreated:
        from bhandar_cli.client import open_tcp_backend
        from bhandar_cli.fleet import resolve_dir

        async with open_tcp_backend(resolve_dir(directory)) as backend:
            return await create_token(backend, to_wire(record))

    created: TokenCreated = run_async("cluster token create", output, body)
    warning = created.warning()
    if warning is not None:  # the token exists: say so and where it does not work yet, exit 0
        sys.stderr.write(f"bhandar: warning: {warning}\n")
    if output is OutputFormat.json:
        shown = {"token": token, **_shown(record.to_plain())}
        spread = {"known_by": list(created.known_by), "not_yet": list(created.not_yet)}
        emit_json({"cmd": "cluster token create", "ok": True, **shown, **spread})
        return
    _print(f"token [bold]{record.id}[/bold] ({role} on {keyspace}); shown once, keep it:")
    print(token)


@token_app.command("list")
def list_tokens(directory: str | None = DIR_OPTION, output: OutputFormat = OUTPUT_OPTION) -> None:
    """Every token the cluster knows: id, grants, rate, created, revoked (never a secret)."""

    async def body() -> Any:
        return await _admin_call(directory, "token_list")

    rows = [_shown(r) for r in run_async("cluster token list", output, body)]
    if output is OutputFormat.json:
        emit_json({"cmd": "cluster token list", "ok": True, "tokens": rows})
        return
    from rich.table import Table

    table = Table("id", "grants", "rate", "burst", "created", "revoked", box=None)
    for r in rows:
        grants = ", ".join(f"{role} on {ks}" for ks, role in r["grants"].items())
        rate = f"{r['rate']:g}/s" if r["rate"] else "-"
        revoked = "yes" if r["revoked"] else ""
        table.add_row(r["id"], grants, rate, str(r["burst"] or "-"), r["created"], revoked)
    _print(table)


@token_app.command("revoke")
def revoke(
    token_id: str = typer.Argument(..., metavar="ID", help="The token's id (from create or list)."),
    directory: str | None = DIR_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Revoke a token for good; every node refuses it within a few gossip rounds."""

    async def body() -> Any:
        return await _admin_call(directory, "token_revoke", token_id=token_id)

    run_async("cluster token revoke", output, body)
    if output is OutputFormat.json:
        emit_json({"cmd": "cluster token revoke", "ok": True, "id": token_id})
        return
    _print(f"token {token_id} revoked")


def _shown(plain: dict[str, Any]) -> dict[str, Any]:
    """A record as a person sees it: its creation time readable, never its hash."""
    created = datetime.datetime.fromtimestamp(float(plain["created"]), datetime.UTC)
    shown = {k: v for k, v in plain.items() if k != "digest"}
    shown["created"] = created.isoformat(timespec="seconds")
    return shown
