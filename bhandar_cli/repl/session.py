"""A REPL session: runs parsed commands through their table entries' handlers and keeps the settings.

Every command yields one `Reply` (ok or not); nothing a person types can raise out of here, so a
bad command costs one line of error and the session goes on.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from bhandar_cli.client import Backend, Client
from bhandar_cli.core.model import BhandarError, ClientError
from bhandar_cli.repl.grammar import ParseError, parse
from bhandar_cli.repl.table import Command, CommandTable
from bhandar_cli.repl.views_ops import progress_line

# How a session serves its web view (the `web` command): web/background.py's
# `serve_in_background`, handed over by whoever opens the session, since the web view is a face
# above the REPL. Answers the page's address.
ServeWeb = Callable[["Session", int], Awaitable[dict[str, Any]]]

if TYPE_CHECKING:
    from bhandar_cli.repl.terminal import Terminal


@dataclass
class Reply:
    cmd: str
    ok: bool
    data: Any  # an outcome, a dict in the documented JSON shape, or a ClientError

    def to_json(self) -> dict[str, Any]:
        if isinstance(self.data, ClientError):
            return self.data.to_json(self.cmd)
        if hasattr(self.data, "to_json"):
            return self.data.to_json()  # type: ignore[no-any-return]
        return dict(self.data)


class Session:
    def __init__(
        self,
        client: Client[Backend],
        commands: CommandTable[Session],
        output: str = "table",
        serve_web: ServeWeb | None = None,
    ) -> None:
        """A session running `commands` (repl/commands' COMMANDS, or fewer) through `client`."""
        self.client = client
        self.output = output
        self.commands = commands
        self.serve_web = serve_web
        self.quit = False
        # Called with every command run and its reply, whoever typed it (the web view draws the
        # session's requests from them); an observer must not raise.
        self.observers: list[Callable[[Command, Reply], None]] = []
        self.web: Any = None  # the web view serving this session (the `web` command), if any
        # Where lines that arrive between commands are printed (the web page's commands): the
        # interactive REPL's terminal, which keeps its prompt intact; None prints to stdout.
        self.terminal: Terminal | None = None

    def show_progress(self, event: dict[str, Any]) -> None:
        """A line of a rolling operation's progress (upgrade, config set), as it happens: through
        the terminal in the interactive REPL (above the prompt, when the page's command box ran
        the operation while a prompt is shown), else on stderr (stdout keeps the one reply)."""
        line = progress_line(event)
        if self.terminal is not None:
            self.terminal.write(line + "\n")
        else:
            print(line, file=sys.stderr, flush=True)

    def parse(self, line: str) -> list[Command]:
        """The line's commands; raises ParseError if any of them does not parse."""
        return parse(line, self.commands)

    async def run_line(self, line: str) -> list[Reply]:
        try:
            commands = self.parse(line)
        except ParseError as exc:
            return [failed_line(exc)]
        replies = []
        for command in commands:
            replies.append(await self.execute(command))
            if self.quit:
                break
        return replies

    async def execute(self, cmd: Command) -> Reply:
        reply = await self._run(cmd)
        for observe in self.observers:
            observe(cmd, reply)
        return reply

    async def _run(self, cmd: Command) -> Reply:
        try:
            data = await cmd.spec.handler(self, cmd)
        except trio.Cancelled:
            raise
        except BhandarError as exc:
            return Reply(cmd.name, False, _as_client_error(exc))
        except Exception as exc:  # a bug of ours: say so, keep the session alive
            return Reply(
                cmd.name, False, ClientError("internal", f"internal error ({type(exc).__name__}: {exc})")
            )
        return Reply(cmd.name, True, data)


def failed_line(exc: ParseError) -> Reply:
    """The reply to a line that did not parse, named after the command that did not."""
    return Reply(exc.name, False, _as_client_error(exc))


def _as_client_error(exc: BhandarError) -> ClientError:
    if isinstance(exc, ClientError):
        return exc
    return ClientError(exc.code, str(exc))
