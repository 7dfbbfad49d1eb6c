"""How an operation's outcome ends a process, for both faces that exit (the CLI, the REPL's batch
mode): the man page's EXIT STATUS; and the two forms they show outcomes in. Small on purpose:
`bhandar --help` and every one-shot command import it.
"""

from __future__ import annotations

from enum import StrEnum

from bhandar_cli.core.model import REFUSED_INPUT

EXIT_OK = 0
EXIT_FAILED = 1  # the operation failed
EXIT_USAGE = 2  # the command line, or input the store refuses
EXIT_NOT_FOUND = 3  # a get found no value
EXIT_INTERRUPTED = 130  # the shell's convention for a program stopped by SIGINT


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


def exit_code(error_code: str) -> int:
    """The exit code of a failed operation: input the store refuses (a keyspace nobody created, a
    value past a limit) is a usage error; anything else failed."""
    return EXIT_USAGE if error_code in REFUSED_INPUT else EXIT_FAILED
