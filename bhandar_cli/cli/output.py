"""Output conventions shared by every command: `-o table|json|raw`, errors to stderr, exit codes.

Exit codes (the man page's EXIT STATUS): 0 success, 1 operation failed, 2 usage error, 3 key not
found; they and the output formats are the client's (client/exit_status.py), which the REPL's batch
mode shares.
Nothing here imports typer until `OUTPUT_OPTION` or `CLUSTER_OPTION` is asked for: one-shot data commands
(cli/oneshot.py) use these conventions without typer.
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

from bhandar_cli.client import EXIT_FAILED, OutputFormat


def __getattr__(name: str) -> Any:
    """`OUTPUT_OPTION` (`-o table|json`) and `CLUSTER_OPTION` (`--cluster DIR`), the options
    typer commands share, made on first use."""
    if name not in ("OUTPUT_OPTION", "CLUSTER_OPTION"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import typer

    if name == "OUTPUT_OPTION":
        option = typer.Option(
            OutputFormat.table, "--output", "-o", help="table (rich on a terminal, plain when piped) or json."
        )
    else:
        option = typer.Option(
            None, "--cluster", metavar="DIR", help="Cluster directory (./.bhandar, $BHANDAR_CLUSTER)."
        )
    globals()[name] = option
    return option


def emit_json(obj: dict[str, Any]) -> None:
    """One JSON object per line, flushed at once so a pipe sees it immediately. Strict JSON: a
    non-finite float (Infinity, NaN, which no JSON parser but Python's accepts) is a bug of the
    command that made it, and raises ValueError instead of being written."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    """A one-line error on standard error and the exit code (SystemExit, which typer lets through
    as it does its own Exit)."""
    sys.stderr.write(f"bhandar: {message}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def fail_json(
    cmd: str, output: OutputFormat | str, message: str, code: str, exit_code: int = EXIT_FAILED
) -> NoReturn:
    """`fail`, with the failure as a JSON object on standard output first when asked for JSON."""
    if str(output) == "json":
        emit_json({"cmd": cmd, "ok": False, "error": message, "code": code})
    fail(message, exit_code)
