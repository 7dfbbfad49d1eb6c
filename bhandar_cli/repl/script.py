"""Running a script in batch mode: each command's place, what stops the script, its exit status.

-e and --script texts are parsed whole before anything runs; standard input is parsed line by line
as it arrives, so that another program can drive the REPL through a pipe. Every error line names
the command it belongs to and its place. The rules are tabulated in `script_rules.SCRIPT_RULES`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from bhandar_cli.client import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, GetOutcome, Notices, news
from bhandar_cli.core.model import ClientError
from bhandar_cli.repl.grammar import ParseError
from bhandar_cli.repl.session import Reply, Session, failed_line
from bhandar_cli.repl.table import Command
from bhandar_cli.repl.views import print_reply, render_error


@dataclass(frozen=True)
class Place:
    """Where a command sits in its script: line and place on the line, both from 1."""

    line: int
    command: int
    label: str  # as error lines say it: "command 3", "line 2", "line 2, command 3"


def place_of(line: int, command: int, count: int, one_line: bool) -> Place:
    """The place of command `command` of the `count` on `line`; a one-line -e names commands only."""
    if one_line:
        label = f"command {command}"
    elif count > 1:
        label = f"line {line}, command {command}"
    else:
        label = f"line {line}"
    return Place(line, command, label)


Step = tuple[Place, Command]


class ScriptRun:
    """Runs a script's commands in order, reports each failure with its place, keeps the status."""

    def __init__(self, session: Session, out: Console, err: Console, keep_going: bool, one_line: bool):
        self.session = session
        self.out = out
        self.err = err
        self.keep_going = keep_going
        self.one_line = one_line
        self.unparsed = False
        self.failed = False
        self.last_not_found = False
        # What the cluster noticed on its own while a command ran (a node down, a partition), as
        # the interactive REPL prints it: `· down: B (noticed by A, C, D, E)` after `sleep 10s`.
        # Table output only: in -o json every command prints exactly one object.
        self.notices = Notices()

    @property
    def status(self) -> int:
        if self.unparsed:
            return EXIT_USAGE
        if self.failed:
            return EXIT_FAILED
        return EXIT_NOT_FOUND if self.last_not_found else EXIT_OK

    def parse(self, number: int, text: str) -> list[Step]:
        """Line `number`'s commands with their places; none, reported, if the line does not parse."""
        try:
            commands = self.session.parse(text)
        except ParseError as exc:
            self.unparsed = True
            self._report(failed_line(exc), place_of(number, exc.index, exc.count, self.one_line))
            return []
        return [(place_of(number, i, len(commands), self.one_line), c) for i, c in enumerate(commands, 1)]

    async def run(self, steps: list[Step]) -> bool:
        """Run the steps in order; False when the script must stop (a failure, unless
        --keep-going, or quit)."""
        for place, command in steps:
            if not self.notices.started:
                await self._news()  # what is known before the first command: not news
            reply = await self.session.execute(command)
            if reply.ok:
                print_reply(self.out, reply, self.session.output, self.session.commands)
                await self._news()
            else:
                self.failed = True
                self._report(reply, place)
                if not self.keep_going:
                    return False
            if self.session.quit:  # ends the script with the status of the commands before it
                return False
            self.last_not_found = isinstance(reply.data, GetOutcome) and not reply.data.found
        return True

    async def _news(self) -> None:
        if self.session.output != "table":
            return
        _, lines = await news(self.session.client.backend, self.notices)
        for line in lines:
            self.out.print(Text(f"· {line}", style="dim"))
        self.out.file.flush()

    def _report(self, reply: Reply, place: Place) -> None:
        """A failure: its JSON object on standard output in -o json mode, and one error line on
        standard error in every mode, both naming the command and its place."""
        if self.session.output == "json":
            shown = {**reply.to_json(), "line": place.line, "command": place.command}
            print_reply(self.out, Reply(reply.cmd, False, shown), "json")
        assert isinstance(reply.data, ClientError)
        self.err.print(render_error(reply.data, f"{place.label} ({reply.cmd}): "))
        self.err.file.flush()


async def run_text(run: ScriptRun, lines: list[str]) -> int:
    """-e and --script: parse every line first; run nothing if any does not parse."""
    parsed = [run.parse(number, text) for number, text in enumerate(lines, 1)]
    if run.unparsed:
        return run.status
    for steps in parsed:
        if not await run.run(steps):
            break
    return run.status


async def run_stream(run: ScriptRun, next_line: Callable[[], Awaitable[str | None]]) -> int:
    """Standard input: each line is parsed and run as it arrives."""
    number = 0
    while (text := await next_line()) is not None:
        number += 1
        steps = run.parse(number, text)
        if (run.unparsed and not run.keep_going) or not await run.run(steps):
            break
    return run.status
