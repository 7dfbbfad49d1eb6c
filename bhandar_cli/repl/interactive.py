"""The interactive REPL: prompt_toolkit in a worker thread, the cluster on trio in the main thread.

This is the pattern of trio's own `python -m trio`: the prompt blocks a worker thread
(`trio.to_thread.run_sync`) and each command goes back to trio with `trio.from_thread.run`.
Everything printed goes through one `Terminal` (repl/terminal.py), which keeps the prompt intact:
replies are written before the next prompt is drawn, and what arrives while a prompt is shown
(notices, the web page's commands) is written above it. Ctrl-C while typing clears the line
(prompt_toolkit reads it as a key); Ctrl-C while a command runs arrives as SIGINT in trio's
thread and cancels that command only. Ctrl-D or `quit` stops the cluster cleanly.
"""

from __future__ import annotations

import os
import shutil
import signal
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
from rich.text import Text

from bhandar_cli import __version__
from bhandar_cli.client import DOWN, ClusterHealth, Notices, cluster_clock, news
from bhandar_cli.core.model import BhandarError
from bhandar_cli.repl.batch import SessionOpener
from bhandar_cli.repl.completer import BhandarCompleter, BhandarLexer, CompletionContext, argument_hint
from bhandar_cli.repl.grammar import ParseError
from bhandar_cli.repl.session import Reply, Session, failed_line
from bhandar_cli.repl.status_line import status_parts
from bhandar_cli.repl.table import Command
from bhandar_cli.repl.terminal import Terminal
from bhandar_cli.repl.views import reply_text

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
        # A console given (tests) is where the terminal writes, at its width.
        self.terminal = Terminal() if console is None else Terminal(console.file, console.width)
        session.terminal = self.terminal  # the web page's commands are echoed through it too
        self.completion = CompletionContext(nodes=list(session.client.backend.names))
        self.health: ClusterHealth | None = None
        self.hints = 0
        self.notices = Notices()
        self._command_scope: trio.CancelScope | None = None

    # --- trio side ---------------------------------------------------------------------------

    async def run(self) -> int:
        token = trio.lowlevel.current_trio_token()
        self.terminal.print(Text.from_markup(self._banner()))  # first, before any notice
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
            spaces = (await client.views.keyspace_list())["keyspaces"]
            pending = (await client.views.hints())["pending"]
        except BhandarError:
            spaces, pending = [], 0
        names = sorted({k["name"] for k in spaces} | set(client.data.keys_seen))
        self.completion = CompletionContext(
            list(backend.names), names, {ks: sorted(keys) for ks, keys in client.data.keys_seen.items()}
        )
        # What the cluster noticed on its own (failure detection, a partition, joins), one line
        # per change (cluster_health.Notices), not one per node that noticed it.
        health, lines = await news(backend, self.notices)
        for line in lines:
            self.terminal.print(Text(f"· {line}", style="dim"))
        self.health, self.hints = health, pending

    async def execute(self, text: str) -> None:
        """Run one line; Ctrl-C (SIGINT) cancels the command in progress and only that."""
        with trio.CancelScope() as scope:
            self._command_scope = scope
            running: Command | None = None
            try:
                commands = self.session.parse(text)
            except ParseError as exc:
                self._print(failed_line(exc))
                commands = []
            for command in commands:
                running = command
                self._print(await self.session.execute(command))
                if self.session.quit:
                    break
        self._command_scope = None
        if scope.cancelled_caught:
            self.terminal.print(Text(interrupted_text(self.session, running), style="yellow"))
        await self._refresh()

    def _print(self, reply: Reply) -> None:
        self.terminal.write(
            reply_text(reply, self.session.output, self.terminal.render, self.session.commands)
        )

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
        # Anything printed to sys.stdout behind the terminal's back (a library's print) still
        # goes above the prompt; everything of ours goes through self.terminal.
        with patch_stdout(raw=True):
            while not self.session.quit:
                try:
                    text = prompt.prompt(
                        HTML("<b>bhandar</b>&gt; "), pre_run=lambda: self.terminal.prompt_started(prompt.app)
                    )
                except KeyboardInterrupt:
                    continue  # Ctrl-C while typing: the line is cleared, the session goes on
                except EOFError:
                    break
                finally:
                    self.terminal.prompt_ended()
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
        client = self.session.client
        parts = (
            [("", "cluster not answering"), ("", client.data.consistency)]
            if self.health is None
            else status_parts(self.health, client.data.consistency, self.hints, client.data.trace, width - 1)
        )
        line = " · ".join(
            f"<style fg='#ff5f5f'><b>{_escape(text)}</b></style>" if kind == DOWN else _escape(text)
            for kind, text in parts
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
