"""`bhandar get|put|delete|incr`: one-shot data commands against a running process cluster.

Output: `-o table` (rich on a terminal, plain when piped), `-o json` (one object, the documented
shapes, failures included) or `-o raw` (the bare value for `$(...)`: a JSON string without its
quotes, other JSON as JSON, one value per line when there are siblings, binary values exactly).
Errors go to standard error in every mode. Exit codes: 0 ok, 1 failed, 2 usage or input the store
refuses (an unknown keyspace, bad_input, too_large: core/limits.py), 3 not found (get).
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Any

import typer

from bhandar_cli.cmd.cluster import open_tcp_client, run_async
from bhandar_cli.cmd.output import EXIT_NOT_FOUND, EXIT_USAGE, emit_json, exit_code, fail


class DataOutput(StrEnum):
    table = "table"
    json = "json"
    raw = "raw"


OUTPUT = typer.Option(DataOutput.table, "--output", "-o", help="table, json, or raw (the bare value).")
CLUSTER = typer.Option(
    None, "--cluster", metavar="DIR", help="Cluster directory (./.bhandar, $BHANDAR_CLUSTER)."
)
LEVEL = typer.Option(None, "--consistency", "-c", metavar="LEVEL", help="ONE, QUORUM (default) or ALL.")
VIA = typer.Option(
    None, "--via", metavar="NODE", help="Coordinator node (default: a live replica of the key)."
)
CONTEXT = typer.Option(
    "none",
    "--context",
    metavar="TOKEN|auto|none",
    help="Causal context from a get; auto reads the key first; none is a blind write.",
)
DELETE_CONTEXT = typer.Option(
    "auto",
    "--context",
    metavar="TOKEN|auto|none",
    help="Causal context from a get; auto reads the key first and deletes what it read; none is a "
    "blind tombstone, which removes nothing already stored.",
)


def _level(text: str | None) -> str | None:
    if text is None:
        return None
    from bhandar_cli.core.config import parse_level
    from bhandar_cli.core.errors import BadInput

    try:
        return parse_level(text)
    except BadInput as exc:
        fail(str(exc), EXIT_USAGE)


def _run(cmd: str, output: DataOutput, cluster: str | None, action: Any) -> Any:
    """Run `action(client)` on the cluster; a failure is told on stderr (and as JSON) with exit 1,
    or 2 when the input was at fault."""
    from bhandar_cli.core.errors import BhandarError
    from bhandar_cli.outcomes import ClientError

    async def body() -> Any:
        async with open_tcp_client(cluster) as client:
            try:
                return await action(client)
            except BhandarError as exc:  # ClientError from the cluster, BadInput from the client
                return exc

    result = run_async(cmd, output, body)
    if isinstance(result, BhandarError):
        error = result if isinstance(result, ClientError) else ClientError(result.code, str(result))
        if output is DataOutput.json:
            emit_json(error.to_json(cmd))
        fail(f"{cmd} failed ({error.code}): {error}", exit_code(error.code))
    return result


def _render(cmd: str, outcome: Any) -> None:
    from bhandar_cli.repl.batch import make_consoles
    from bhandar_cli.repl.session import Reply
    from bhandar_cli.repl.views import print_reply

    out, _ = make_consoles()
    print_reply(out, Reply(cmd, True, outcome), "table")


def _write_raw(values: list[bytes], exact: bool) -> None:
    out = sys.stdout.buffer
    if exact:  # one binary value: byte for byte, no newline added
        out.write(values[0])
    else:
        out.write(b"".join(v + b"\n" for v in values))
    out.flush()


def get(
    keyspace: str = typer.Argument(..., metavar="KS", help="Keyspace."),
    key: str = typer.Argument(..., metavar="KEY", help="Key."),
    consistency: str | None = LEVEL,
    via: str | None = VIA,
    cluster: str | None = CLUSTER,
    output: DataOutput = OUTPUT,
) -> None:
    """Read a key: every sibling and the context to write back with (exit 3 if not found).

    At ONE the key's first live replica answers from its own copy and asks no other replica: fast,
    possibly stale, and it repairs nothing (anti-entropy, or a read at QUORUM or ALL, does)."""
    from bhandar_cli.core.versions import BYTES
    from bhandar_cli.values import raw_value

    level = _level(consistency)
    outcome = _run("get", output, cluster, lambda c: c.get(keyspace, key, level, via))
    if output is DataOutput.json:
        emit_json(outcome.to_json())
    elif output is DataOutput.raw:
        if outcome.counter is not None:
            _write_raw([str(outcome.counter).encode()], False)
        elif outcome.found:
            live = [s for s in outcome.siblings if not s.tombstone]
            values = [raw_value(s.raw, s.ctype) for s in live]
            _write_raw(values, len(live) == 1 and live[0].ctype == BYTES)
        for warning in outcome.warnings:
            sys.stderr.write(f"bhandar: warning: {warning}\n")
    else:
        _render("get", outcome)
    if not outcome.found:
        fail(f"{keyspace}/{key} not found", EXIT_NOT_FOUND)


def put(
    keyspace: str = typer.Argument(..., metavar="KS", help="Keyspace."),
    key: str = typer.Argument(..., metavar="KEY", help="Key."),
    value: str = typer.Argument(
        ..., metavar="VALUE", help="A JSON literal or a bare string; - reads standard input."
    ),
    context: str = CONTEXT,
    consistency: str | None = LEVEL,
    via: str | None = VIA,
    cluster: str | None = CLUSTER,
    output: DataOutput = OUTPUT,
) -> None:
    """Write a value (with the context of a previous get to replace what it read)."""
    from bhandar_cli.core.errors import BadInput
    from bhandar_cli.values import parse_value_bytes, parse_value_text

    try:
        data, ctype = parse_value_bytes(sys.stdin.buffer.read()) if value == "-" else parse_value_text(value)
    except BadInput as exc:
        if output is DataOutput.json:
            emit_json({"cmd": "put", "ok": False, "error": str(exc), "code": exc.code})
        fail(f"put failed ({exc.code}): {exc}", EXIT_USAGE)
    _write("put", keyspace, key, data, ctype, context, consistency, via, cluster, output)


def delete(
    keyspace: str = typer.Argument(..., metavar="KS", help="Keyspace."),
    key: str = typer.Argument(..., metavar="KEY", help="Key."),
    context: str = DELETE_CONTEXT,
    consistency: str | None = LEVEL,
    via: str | None = VIA,
    cluster: str | None = CLUSTER,
    output: DataOutput = OUTPUT,
) -> None:
    """Delete a key: read it and write a tombstone that replaces what the read found (prints what
    it removed); with --context TOKEN it replaces what that get saw."""
    level = _level(consistency)
    outcome = _run("delete", output, cluster, lambda c: c.delete(keyspace, key, context, level, via))
    _finish_write("delete", output, outcome)


def _write(
    cmd: str,
    keyspace: str,
    key: str,
    data: bytes | None,
    ctype: str,
    context: str,
    consistency: str | None,
    via: str | None,
    cluster: str | None,
    output: DataOutput,
) -> None:
    """put: `--context auto` reads the key first."""
    level = _level(consistency)

    async def action(client: Any) -> Any:
        if context == "auto":
            await client.get(keyspace, key, level, via)
        return await client.put(keyspace, key, data, ctype, context, level, via)

    _finish_write(cmd, output, _run(cmd, output, cluster, action))


def _finish_write(cmd: str, output: DataOutput, outcome: Any) -> None:
    if output is DataOutput.json:
        emit_json(outcome.to_json())
    elif output is DataOutput.table:
        _render(cmd, outcome)
    for warning in outcome.warnings:
        sys.stderr.write(f"bhandar: warning: {warning}\n")


def incr(
    keyspace: str = typer.Argument(
        ..., metavar="KS", help="A counter keyspace (counters exists from the start)."
    ),
    key: str = typer.Argument(..., metavar="KEY", help="Key."),
    delta: int = typer.Argument(1, metavar="DELTA", help="Amount to add (negative subtracts)."),
    request_id: str | None = typer.Option(None, "--id", help="Request id: a retry with it counts once."),
    consistency: str | None = LEVEL,
    via: str | None = VIA,
    cluster: str | None = CLUSTER,
    output: DataOutput = OUTPUT,
) -> None:
    """Add to a PN-counter; prints the new value."""
    level = _level(consistency)
    outcome = _run("incr", output, cluster, lambda c: c.incr(keyspace, key, delta, request_id, level, via))
    if output is DataOutput.json:
        emit_json(outcome.to_json())
    elif output is DataOutput.raw:
        _write_raw([str(outcome.value).encode()], False)
    else:
        _render("incr", outcome)


__all__ = ["delete", "get", "incr", "put"]
