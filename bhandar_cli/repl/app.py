"""The interactive REPL: prompt_toolkit in a worker thread, the cluster on trio in the main thread.

This is the pattern of trio's own `python -m trio`: the prompt blocks a worker thread
(`trio.to_thread.run_sync`) and each command goes back to trio with `trio.from_thread.run`.
`patch_stdout(raw=True)` keeps output printed while the prompt is shown (and rich's colours) from
tearing the prompt. Ctrl-C while typing clears the line (prompt_toolkit reads it as a key); Ctrl-C
while a command runs arrives as SIGINT in trio's thread and cancels that command only. Ctrl-D or
`quit` stops the cluster cleanly.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import trio
from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import get_app
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import CompleteEvent, get_common_complete_suffix
from prompt_toolkit.formatted_text import HTML
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style
from rich.console import Console
from rich.markup import escape as _markup_escape

from bhandar_cli import __version__
from bhandar_cli.client.openers import cluster_clock
from bhandar_cli.core.model.errors import BhandarError
from bhandar_cli.repl.batch import SessionOpener
from bhandar_cli.repl.completer import BhandarCompleter, BhandarLexer, CompletionContext, argument_hint
from bhandar_cli.repl.grammar import ParseError
from bhandar_cli.repl.session import Reply, Session, failed_line
from bhandar_cli.repl.status_line import Notices, status_parts
from bhandar_cli.repl.table import Command
from bhandar_cli.repl.views import print_reply

STYLE = Style.from_dict(
    {
        "command": "bold ansibrightcyan",
        "unknown": "ansired",
        "option": "ansiyellow",
        "node": "bold ansimagenta",
        "value": "ansigreen",
        "comment": "italic ansibrightblack",
        "separator": "bold",
        "bottom-toolbar": "noreverse bg:#222222 #cccccc",
        "bottom-toolbar.down": "bold #ff5f5f",
        "bottom-toolbar.hint": "#888888",
    }
)


def history_path() -> Path:
    """$XDG_STATE_HOME/bhandar/history (default ~/.local/state/bhandar/history)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "bhandar" / "history"


def open_history(path: Path | None) -> History:
    try:
        target = path or history_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        return FileHistory(str(target))
    except OSError:
        return InMemoryHistory()  # a read-only home must not stop the REPL


class InteractiveApp:
    def __init__(
        self,
        session: Session,
        pt_input: Input | None = None,
        pt_output: Output | None = None,
        history: History | None = None,
        console: Console | None = None,
    ) -> None:
        self.session = session
        self.pt_input = pt_input
        self.pt_output = pt_output
        self.history = history if history is not None else open_history(None)
        self.console = console
        self.completion = CompletionContext(nodes=list(session.client.backend.names))
        self.toolbar_state: dict[str, Any] = {}
        self.notices = Notices()
        self._command_scope: trio.CancelScope | None = None

    # --- trio side ---------------------------------------------------------------------------

    async def run(self) -> int:
        token = trio.lowlevel.current_trio_token()
        await self._refresh()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._refresh_loop)
            if threading.current_thread() is threading.main_thread():
                nursery.start_soon(self._watch_sigint)
            code = await trio.to_thread.run_sync(self._prompt_loop, token)
            nursery.cancel_scope.cancel()
        return code

    async def _watch_sigint(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if self._command_scope is not None:
                    self._command_scope.cancel()

    async def _refresh_loop(self) -> None:
        while True:
            await trio.sleep(0.3)
            await self._refresh()

    async def _refresh(self) -> None:
        client = self.session.client
        backend = client.backend
        try:
            spaces = await client.views.keyspace_list()
            hints = await client.views.hints()
        except BhandarError:
            spaces, hints = {"keyspaces": []}, {"pending": 0}
        names = sorted({k["name"] for k in spaces["keyspaces"]} | set(client.data.keys_seen))
        self.completion = CompletionContext(
            list(backend.names), names, {ks: sorted(keys) for ks, keys in client.data.keys_seen.items()}
        )
        self._print_news(await backend.drain_notes())
        self.toolbar_state = {
            "down": [n for n in backend.names if not backend.is_alive(n)],
            "nodes": len(backend.names),
            "partitions": backend.partitions(),
            "consistency": client.data.consistency,
            "hints": hints["pending"],
            "trace": client.data.trace,
        }

    def _print_news(self, notes: list[tuple[str, dict[str, Any], str]]) -> None:
        """What the cluster noticed on its own (failure detection, joins), above the prompt: one
        line per change (repl/status_line.py), not one per node that noticed it."""
        backend = self.session.client.backend
        alive = [n for n in backend.names if backend.is_alive(n)]
        for line in self.notices.fold(notes, alive):
            self._console().print(f"[dim]· {_markup_escape(line)}[/dim]")

    async def execute(self, text: str) -> None:
        """Run one line; Ctrl-C (SIGINT) cancels the command in progress and only that."""
        console = self._console()
        with trio.CancelScope() as scope:
            self._command_scope = scope
            running: Command | None = None
            try:
                commands = self.session.parse(text)
            except ParseError as exc:
                self._print(console, failed_line(exc))
                commands = []
            for command in commands:
                running = command
                self._print(console, await self.session.execute(command))
                if self.session.quit:
                    break
        self._command_scope = None
        if scope.cancelled_caught:
            console.print(f"[yellow]{_markup_escape(interrupted_text(self.session, running))}[/yellow]")
        await self._refresh()

    def _print(self, console: Console, reply: Reply) -> None:
        print_reply(console, reply, self.session.output, self.session.commands)

    def _console(self) -> Console:
        if self.console is not None:
            return self.console
        # Resolved at print time so output goes through patch_stdout's proxy.
        width = shutil.get_terminal_size((100, 24)).columns
        tty = sys.__stdout__ is not None and sys.__stdout__.isatty()
        return Console(force_terminal=tty, width=width)

    # --- prompt thread -----------------------------------------------------------------------

    def _prompt_loop(self, token: trio.lowlevel.TrioToken) -> int:
        completer = BhandarCompleter(lambda: self.completion, self.session.commands)
        prompt: PromptSession[str] = PromptSession(
            history=self.history,
            auto_suggest=AutoSuggestFromHistory(),
            completer=completer,
            key_bindings=tab_bindings(completer),
            lexer=BhandarLexer(lambda: self.completion.nodes, self.session.commands),
            complete_while_typing=True,
            bottom_toolbar=self._toolbar,
            style=STYLE,
            refresh_interval=0.5,
            input=self.pt_input,
            output=self.pt_output,
        )
        with patch_stdout(raw=True):
            self._console().print(self._banner())
            while not self.session.quit:
                try:
                    text = prompt.prompt(HTML("<b>bhandar</b>&gt; "))
                except KeyboardInterrupt:
                    continue  # Ctrl-C while typing: the line is cleared, the session goes on
                except EOFError:
                    break
                if text.strip():
                    trio.from_thread.run(self.execute, text, trio_token=token)
        return 0

    def _banner(self) -> str:
        backend = self.session.client.backend
        names = backend.names
        zones = len(set(backend.zones.values()))
        return (
            f"[bold]Bhandar {__version__}[/bold] — {len(names)} nodes ({names[0]}–{names[-1]}) "
            f"in {zones} zones, "
            f"consistency {self.session.client.data.consistency}. Type [bold]help[/bold]; Tab completes; "
            "Ctrl-D quits."
        )

    def _toolbar(self) -> Any:
        try:
            app = get_app()
            width = app.output.get_size().columns
            hint = argument_hint(app.current_buffer.text)
        except Exception:  # no running application (rendering outside a prompt)
            width, hint = shutil.get_terminal_size((80, 24)).columns, ""
        line = " · ".join(
            f"<style fg='#ff5f5f'><b>{_escape(text)}</b></style>" if style == "down" else _escape(text)
            for style, text in status_parts(self.toolbar_state, width - 1)
        )
        if hint:
            line += f"\n<style fg='#888888'>{_escape(hint)}</style>"
        return HTML(line)


def tab_bindings(completer: BhandarCompleter) -> KeyBindings:
    """Tab completes from the grammar at once, even while a completion-as-you-type is in flight.

    prompt_toolkit's own Tab does nothing when it lands while the background completion has not
    produced its list yet (typing fast, or pasting `sta<Tab>`); our completer is cheap, so run it.
    """
    bindings = KeyBindings()

    @bindings.add("tab")
    def _(event: Any) -> None:
        buffer = event.current_buffer
        state = buffer.complete_state
        if state is not None and state.completions:
            buffer.complete_next()
            return
        found = list(completer.get_completions(buffer.document, CompleteEvent(completion_requested=True)))
        if len(found) == 1:
            buffer.apply_completion(found[0])
        elif found:
            common = get_common_complete_suffix(buffer.document, found)
            if common:
                buffer.insert_text(common)
            buffer.start_completion(select_first=False)

    return bindings


def interrupted_text(session: Session, command: Command | None) -> str:
    """What a Ctrl-C left: the command's own account when its action goes on in the cluster."""
    explain = None if command is None else command.spec.interrupted
    return "cancelled" if explain is None or command is None else explain(session, command)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def run_interactive(opener: SessionOpener, virtual_time: bool = False) -> int:
    async def main() -> int:
        async with opener() as session:
            return await InteractiveApp(session).run()

    return trio.run(main, clock=cluster_clock(virtual_time))
