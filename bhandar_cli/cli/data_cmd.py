"""`bhandar get|put|delete|incr`: the typer faces of the one-shot data commands.

Arguments, options and help only; cli/oneshot.py runs them (and says what the output modes and
exit codes are). The lean entry point (launch.py) runs the same functions without typer when
the command line is one it can read.
"""

from __future__ import annotations

import typer

from bhandar_cli.cli import oneshot
from bhandar_cli.cli.oneshot import DataOutput
from bhandar_cli.cli.output import CLUSTER_OPTION

OUTPUT = typer.Option(DataOutput.table, "--output", "-o", help="table, json, or raw (the bare value).")
LEVEL = typer.Option(None, "--consistency", "-c", metavar="LEVEL", help="ONE, QUORUM (default) or ALL.")
VIA = typer.Option(
    None,
    "--via",
    metavar="NODE",
    help="Node to send it to (default: a live replica of the key); a write it forwards says so.",
)
CONTEXT = typer.Option(
    "none",
    "--context",
    metavar="CONTEXT|auto|none",
    help="Causal context from a get; auto reads the key first; none is a blind write.",
)
DELETE_CONTEXT = typer.Option(
    "auto",
    "--context",
    metavar="CONTEXT|auto|none",
    help="Causal context from a get; auto reads the key first and deletes what it read; none is a "
    "blind tombstone, which removes nothing already stored.",
)


def get(
    keyspace: str = typer.Argument(..., metavar="KS", help="Keyspace."),
    key: str = typer.Argument(..., metavar="KEY", help="Key."),
    consistency: str | None = LEVEL,
    via: str | None = VIA,
    cluster: str | None = CLUSTER_OPTION,
    output: DataOutput = OUTPUT,
) -> None:
    """Read a key: every sibling and the context to write back with (exit 3 if not found).

    At ONE the key's first live replica answers from its own copy and asks no other replica: fast,
    possibly stale, and it repairs nothing (anti-entropy, or a read at QUORUM or ALL, does)."""
    oneshot.get(keyspace, key, consistency, via, cluster, output)


def put(
    keyspace: str = typer.Argument(..., metavar="KS", help="Keyspace."),
    key: str = typer.Argument(..., metavar="KEY", help="Key."),
    value: str = typer.Argument(
        ..., metavar="VALUE", help="A JSON literal or a bare string; - reads standard input."
    ),
    context: str = CONTEXT,
    consistency: str | None = LEVEL,
    via: str | None = VIA,
    cluster: str | None = CLUSTER_OPTION,
    output: DataOutput = OUTPUT,
) -> None:
    """Write a value (with the context of a previous get to replace what it read)."""
    oneshot.put(keyspace, key, value, context, consistency, via, cluster, output)


def delete(
    keyspace: str = typer.Argument(..., metavar="KS", help="Keyspace."),
    key: str = typer.Argument(..., metavar="KEY", help="Key."),
    context: str = DELETE_CONTEXT,
    consistency: str | None = LEVEL,
    via: str | None = VIA,
    cluster: str | None = CLUSTER_OPTION,
    output: DataOutput = OUTPUT,
) -> None:
    """Delete a key: read it and write a tombstone that replaces what the read found (prints what
    it removed); with --context CONTEXT it replaces what that get saw."""
    oneshot.delete(keyspace, key, context, consistency, via, cluster, output)


def incr(
    keyspace: str = typer.Argument(
        ..., metavar="KS", help="A counter keyspace (counters exists from the start)."
    ),
    key: str = typer.Argument(..., metavar="KEY", help="Key."),
    delta: int = typer.Argument(1, metavar="DELTA", help="Amount to add (negative subtracts)."),
    request_id: str | None = typer.Option(None, "--id", help="Request id: a retry with it counts once."),
    consistency: str | None = LEVEL,
    via: str | None = VIA,
    cluster: str | None = CLUSTER_OPTION,
    output: DataOutput = OUTPUT,
) -> None:
    """Add to a PN-counter; prints the new value."""
    oneshot.incr(keyspace, key, delta, request_id, consistency, via, cluster, output)


__all__ = ["delete", "get", "incr", "put"]
