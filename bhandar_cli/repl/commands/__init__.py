"""The table of REPL commands: every module's entries, in the order `help` and the man page list them.

A new command is one decorated handler in one of these modules (see `repl.table`); a new module
of commands is one more line here.
"""

from __future__ import annotations

from bhandar_cli.repl.commands import control, data, observe, operate
from bhandar_cli.repl.session import Session
from bhandar_cli.repl.table import CommandTable

COMMANDS: CommandTable[Session] = CommandTable([*data.TABLE, *observe.TABLE, *operate.TABLE, *control.TABLE])
