"""The rules of a script in batch mode, one row per case: what happens, the exit status, an example.

The man page prints these rows (SCRIPTS) and the tests run each row's example and check its exit
status, so the page and the behaviour cannot drift apart.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from bhandar_cli.client import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE

SCRIPT_FILE = "script.txt"  # the file name the --script examples use


@dataclass(frozen=True)
class ScriptRule:
    name: str  # short and stable: the tests key their checks by it
    case: str
    outcome: str
    status: int
    args: tuple[str, ...]  # the example: bhandar repl ARGS
    stdin: str | None = None  # ... with these lines piped in
    script: str | None = None  # ... with these lines in SCRIPT_FILE

    def example(self) -> str:
        """The example as a shell command line."""
        command = shlex.join(("bhandar", "repl", *self.args))
        if self.stdin is not None:
            return f"{_printf(self.stdin)} | {command}"
        if self.script is not None:
            return f"{_printf(self.script)} > {SCRIPT_FILE}; {command}"
        return command


def _printf(lines: str) -> str:
    return "printf " + shlex.quote(lines.replace("\n", "\\n"))


SCRIPT_RULES = (
    ScriptRule(
        "success",
        "Every command succeeds",
        "Each command prints its result as soon as it completes.",
        EXIT_OK,
        ("-e", "put kv k1 x; get kv k1"),
    ),
    ScriptRule(
        "failure",
        "A command fails",
        """The script stops there. The error, on standard error, names that command and its place:
        command 2 (put): error (unknown_keyspace): ... The commands after it do not run.""",
        EXIT_FAILED,
        ("-e", "put kv k1 x; put nosuch k1 x; get kv k1"),
    ),
    ScriptRule(
        "keep-going",
        "A command fails, with --keep-going",
        "Every command runs; each failure is reported with its place.",
        EXIT_FAILED,
        ("--keep-going", "-e", "put nosuch k1 x; put kv k1 x; get kv k1"),
    ),
    ScriptRule(
        "unparsed",
        "A command does not parse (-e)",
        """The whole text is parsed before anything runs: each command that does not parse is
        reported with its place (command 3) and nothing runs, with --keep-going too.""",
        EXIT_USAGE,
        ("-e", "get nosuch k1; put nosuch k1 x; keyspaces"),
    ),
    ScriptRule(
        "unparsed-script",
        "A line does not parse (--script)",
        """The whole file is parsed before anything runs: each line that does not parse is reported
        with its line number (line 3; line 3, command 2 when it holds several) and nothing runs,
        with --keep-going too.""",
        EXIT_USAGE,
        ("--script", SCRIPT_FILE),
        script="put kv k1 x\nget kv k1\nkeyspaces\n",
    ),
    ScriptRule(
        "unparsed-stdin",
        "A line does not parse (standard input)",
        """Lines run as they arrive, so the lines before it have run; it is reported with its line
        number and the script stops there.""",
        EXIT_USAGE,
        (),
        stdin="put kv k1 x\nkeyspaces\nget kv k1\n",
    ),
    ScriptRule(
        "unparsed-stdin-keep-going",
        "A line does not parse (standard input), with --keep-going",
        "It is reported with its line number and skipped; the lines after it run.",
        EXIT_USAGE,
        ("--keep-going",),
        stdin="put kv k1 x\nkeyspaces\nget kv k1\n",
    ),
    ScriptRule(
        "not-found",
        "A get finds nothing",
        "Not a failure: it prints (not found) and the script goes on.",
        EXIT_OK,
        ("-e", "get kv k1; put kv k1 x"),
    ),
    ScriptRule(
        "not-found-last",
        "The last command run is a get that finds nothing",
        "It prints (not found), and the script ends with the status bhandar get gives a missing key.",
        EXIT_NOT_FOUND,
        ("-e", "put kv k1 x; get kv k2"),
    ),
    ScriptRule(
        "quit",
        "quit",
        """The script ends there: later commands and lines do not run. The status is that of the
        commands before it.""",
        EXIT_OK,
        ("-e", "put kv k1 x; quit; put nosuch k1 x"),
    ),
    ScriptRule(
        "json",
        "-o json",
        """Every command prints one JSON object on standard output; a failure, or a command that
        does not parse, prints "ok": false with its "line" and "command" (its place on the line,
        from 1), and is told on standard error too.""",
        EXIT_FAILED,
        ("-o", "json", "--keep-going", "-e", "put nosuch k1 x; get kv k1"),
    ),
)

STATUS_ORDER = """The exit status is 2 if a line did not parse; else 1 if a command failed; else 3 if
the last command run before the end or quit was a get that found nothing; else 0."""
