"""Output conventions shared by every command: `-o table|json|raw`, errors to stderr, exit codes.

Exit codes (the man page's EXIT STATUS): 0 success, 1 operation failed, 2 usage error, 3 key not found.
Nothing here imports typer until `OUTPUT_OPTION` or `CLUSTER_OPTION` is asked for: one-shot data commands
(cli/oneshot.py) use these conventions without typer.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import Any, NoReturn

from bhandar_cli.core.model.errors import REFUSED_INPUT

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


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


def exit_code(error_code: str) -> int:
    """The exit code of a failed operation: input the store refuses (a keyspace nobody created, a
    value past a limit) is a usage error; anything else failed."""
    return EXIT_USAGE if error_code in REFUSED_INPUT else EXIT_FAILED


def emit_json(obj: dict[str, Any]) -> None:
    """One JSON object per line, flushed at once so a pipe sees it immediately."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
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
