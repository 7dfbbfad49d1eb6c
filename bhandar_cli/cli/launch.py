"""The `bhandar` entry point: a one-shot data command runs at once, everything else goes to typer.

A shell loop of `bhandar put`/`get` pays the start-up of every invocation, and importing typer
(with pydantic) and its commands costs more than the request itself. So a command line that is
plainly `get`, `put`, `delete` or `incr` with the options they take is read here and handed to
cli/oneshot.py, the functions the typer commands (cli/data_cmd.py) call too. Anything else, or
anything unusual (`--help`, an unknown option, a missing argument, a value that does not
convert, `--`), goes to the typer application (app.py) untouched, so its help, its usage errors
(one line each, cli.main) and their exit codes are the same as for any other command.
"""

from __future__ import annotations

import gc
import os
import sys
from dataclasses import dataclass, field
from typing import Any, NoReturn

# Each command's options: long and short spellings -> the parameter they set.
_COMMON = {"--consistency": "consistency", "-c": "consistency", "--via": "via", "--cluster": "cluster"}
_COMMON |= {"--output": "output", "-o": "output"}
OPTIONS: dict[str, dict[str, str]] = {
    "get": _COMMON,
    "put": _COMMON | {"--context": "context"},
    "delete": _COMMON | {"--context": "context"},
    "incr": _COMMON | {"--id": "request_id"},
}
ARGUMENTS = {"get": (2, 2), "put": (3, 3), "delete": (2, 2), "incr": (2, 3)}  # (fewest, most)
DEFAULTS: dict[str, dict[str, Any]] = {
    "get": {},
    "put": {"context": "none"},
    "delete": {"context": "auto"},
    "incr": {"request_id": None},
}
OUTPUTS = ("table", "json", "raw")


@dataclass
class OneShot:
    """A data command line read in full: the command, its arguments and its options."""

    cmd: str
    arguments: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)


def read_oneshot(argv: list[str]) -> OneShot | None:
    """The data command `argv` asks for, or None when typer should read it."""
    if not argv or argv[0] not in OPTIONS:
        return None
    known = OPTIONS[argv[0]]
    line = OneShot(argv[0], options={"consistency": None, "via": None, "cluster": None, "output": "table"})
    line.options |= DEFAULTS[argv[0]]
    rest = iter(argv[1:])
    for arg in rest:
        if arg == "-" or not arg.startswith("-"):
            line.arguments.append(arg)
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
        if name not in known:
            return None
        if not eq and not value:
            value = next(rest, "")
            if not value or (value.startswith("-") and value != "-"):
                return None  # a missing value, or one typer might read as an option
        line.options[known[name]] = value
    fewest, most = ARGUMENTS[line.cmd]
    if not fewest <= len(line.arguments) <= most or line.options["output"] not in OUTPUTS:
        return None
    if line.cmd == "incr":
        try:
            line.options["delta"] = int(line.arguments.pop(2)) if len(line.arguments) == 3 else 1
        except ValueError:
            return None
    return line


def run(line: OneShot) -> None:
    from bhandar_cli.cli import oneshot

    o = line.options
    keyspace, key = line.arguments[:2]
    where = {"consistency": o["consistency"], "via": o["via"], "cluster": o["cluster"]}
    output = oneshot.DataOutput(o["output"])
    if line.cmd == "get":
        oneshot.get(keyspace, key, output=output, **where)
    elif line.cmd == "put":
        oneshot.put(keyspace, key, line.arguments[2], o["context"], output=output, **where)
    elif line.cmd == "delete":
        oneshot.delete(keyspace, key, o["context"], output=output, **where)
    else:
        oneshot.incr(keyspace, key, o["delta"], o["request_id"], output=output, **where)


def main() -> None:
    line = read_oneshot(sys.argv[1:])
    if line is None:
        from bhandar_cli.cli.app import main as typer_main

        typer_main()
        return
    os.umask(0o077)  # as cli.main: whatever a command creates is its owner's only
    # A command that lives for a request makes no garbage worth collecting, and the collector's
    # passes over everything its imports create cost it a millisecond or two.
    gc.disable()
    try:
        run(line)
    except SystemExit as exc:  # fail(): the message is out, the code says which failure
        exit_now(exc.code)
    exit_now(0)


def exit_now(code: object) -> NoReturn:
    """End the process as `sys.exit(code)` would, without tearing the interpreter down.

    Freeing every module and object one by one costs a one-shot command some 8 ms of CPU that
    its exit does anyway. What matters of the teardown is done here: the exit code read as
    SystemExit reads it, the output flushed. Only the one-shot path ends so: it holds no thread,
    no atexit handler and no file of its own open (its connections are closed by then)."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        sys.stderr.write(f"{code}\n")
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: let the interpreter say so, as it always does
        sys.exit(status)
    os._exit(status)


if __name__ == "__main__":
    main()
