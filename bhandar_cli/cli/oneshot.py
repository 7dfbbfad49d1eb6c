"""Running one data command (get, put, delete, incr) against a process cluster, and showing it.

Output: `-o table` (rich on a terminal, plain when piped), `-o json` (one object, the documented
shapes, failures included) or `-o raw` (the bare value for `$(...)`: a JSON string without its
quotes, other JSON as JSON, one value per line when there are siblings, binary values exactly).
Errors go to standard error in every mode. Exit codes: 0 ok, 1 failed, 2 usage or input the store
refuses (an unknown keyspace, bad_input, too_large: core/model/limits.py), 3 not found (get).

Both faces call these functions: the typer commands (cli/data_cmd.py) and the lean entry point
(launch.py), which runs them without importing typer. They reach the cluster through a
`DataClient` on blocking sockets (client/backends/blocking_backend.py), so neither starts trio; rich is
imported only to print a table.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from enum import StrEnum
from typing import Any

from bhandar_cli.cli.output import emit_json, fail, fail_json
from bhandar_cli.client import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_USAGE, exit_code


class DataOutput(StrEnum):
    table = "table"
    json = "json"
    raw = "raw"


Action = Callable[[Any], Coroutine[Any, Any, Any]]


def _level(text: str | None) -> str | None:
    if text is None:
        return None
    from bhandar_cli.core.model import BadInput, parse_level

    try:
        return parse_level(text)
    except BadInput as exc:
        fail(str(exc), EXIT_USAGE)


def _run(cmd: str, output: DataOutput, cluster: str | None, action: Action) -> Any:
    """Run `action(client)` on the cluster; a failure is told on stderr (and as JSON) with exit 1,
    or 2 when the input was at fault."""
    from bhandar_cli.client import open_blocking_client, run_to_completion
    from bhandar_cli.core.model import BhandarError, ClientError
    from bhandar_cli.fleet import ClusterFileError, resolve_dir

    try:
        with open_blocking_client(resolve_dir(cluster)) as client:
            try:
                return run_to_completion(action(client))
            except BhandarError as exc:  # ClientError from the cluster, BadInput from the client
                error = exc if isinstance(exc, ClientError) else ClientError(exc.code, str(exc))
    except ClusterFileError as exc:
        fail_json(cmd, output, str(exc), "no_cluster")
    except KeyboardInterrupt:
        fail("interrupted", EXIT_FAILED)
    if output is DataOutput.json:
        emit_json(error.to_json(cmd))
    fail(f"{cmd} failed ({error.code}): {error}", exit_code(error.code))


def _render(outcome: Any) -> None:
    from rich.console import Console

    from bhandar_cli.client import GetOutcome, IncrOutcome
    from bhandar_cli.repl import render_get, render_incr, render_write

    out = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 120, soft_wrap=True)
    if isinstance(outcome, GetOutcome):
        out.print(render_get(outcome))
    elif isinstance(outcome, IncrOutcome):
        out.print(render_incr(outcome))
    else:
        out.print(render_write(outcome))
    sys.stdout.flush()


def _write_raw(values: list[bytes], exact: bool) -> None:
    out = sys.stdout.buffer
    if exact:  # one binary value: byte for byte, no newline added
        out.write(values[0])
    else:
        out.write(b"".join(v + b"\n" for v in values))
    out.flush()


def get(
    keyspace: str, key: str, consistency: str | None, via: str | None, cluster: str | None, output: DataOutput
) -> None:
    from bhandar_cli.core.model import BYTES, raw_value

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
        _render(outcome)
    if not outcome.found:
        fail(f"{keyspace}/{key} not found", EXIT_NOT_FOUND)


def put(
    keyspace: str,
    key: str,
    value: str,
    context: str,
    consistency: str | None,
    via: str | None,
    cluster: str | None,
    output: DataOutput,
) -> None:
    """put: `--context auto` reads the key first; VALUE `-` reads standard input."""
    from bhandar_cli.core.model import BadInput, parse_value_bytes, parse_value_text

    try:
        parsed = parse_value_bytes(sys.stdin.buffer.read()) if value == "-" else parse_value_text(value)
    except BadInput as exc:
        if output is DataOutput.json:
            emit_json({"cmd": "put", "ok": False, "error": str(exc), "code": exc.code})
        fail(f"put failed ({exc.code}): {exc}", EXIT_USAGE)
    level = _level(consistency)

    async def action(client: Any) -> Any:
        if context == "auto":
            await client.get(keyspace, key, level, via)
        outcome = await client.put(keyspace, key, parsed.data, parsed.ctype, context, level, via)
        return outcome.warned(parsed.warning)

    _finish_write(output, _run("put", output, cluster, action))


def delete(
    keyspace: str,
    key: str,
    context: str,
    consistency: str | None,
    via: str | None,
    cluster: str | None,
    output: DataOutput,
) -> None:
    level = _level(consistency)
    outcome = _run("delete", output, cluster, lambda c: c.delete(keyspace, key, context, level, via))
    _finish_write(output, outcome)


def _finish_write(output: DataOutput, outcome: Any) -> None:
    if output is DataOutput.json:
        emit_json(outcome.to_json())
    elif output is DataOutput.table:
        _render(outcome)
    for warning in outcome.warnings:
        sys.stderr.write(f"bhandar: warning: {warning}\n")


def incr(
    keyspace: str,
    key: str,
    delta: int,
    request_id: str | None,
    consistency: str | None,
    via: str | None,
    cluster: str | None,
    output: DataOutput,
) -> None:
    level = _level(consistency)
    outcome = _run("incr", output, cluster, lambda c: c.incr(keyspace, key, delta, request_id, level, via))
    if output is DataOutput.json:
        emit_json(outcome.to_json())
    elif output is DataOutput.raw:
        _write_raw([str(outcome.value).encode()], False)
    else:
        _render(outcome)
