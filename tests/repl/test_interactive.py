"""The interactive prompt, driven through prompt_toolkit's pipe input on a real trio cluster."""

from __future__ import annotations

import io
import signal
import threading
import time
from pathlib import Path

import trio
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.completer import BhandarCompleter, CompletionContext, argument_hint
from bhandar_cli.repl.interactive import InteractiveApp

CTX = CompletionContext(["A", "B", "C"], ["carts", "counters"], {"carts": ["cart:42", "cart:7"]})


def complete(text: str) -> list[str]:
    completer = BhandarCompleter(lambda: CTX)
    return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]


def test_completion_knows_the_grammar() -> None:
    assert complete("sta") == ["status"]
    assert complete("put ca") == ["carts"]
    assert complete("get carts cart:4") == ["cart:42"]
    assert complete("kill ") == ["A", "B", "C"]
    assert complete("get carts cart:42 c=Q") == ["c=QUORUM"]
    assert complete("put carts cart:42 v via=") == ["via=A", "via=B", "via=C"]
    assert set(complete("put carts cart:42 v ")) == {"ctx=", "c=", "via="}
    assert complete("keyspace ") == ["create", "list"]
    assert complete("trace o") == ["on", "off"]
    assert complete("status; ki") == ["kill"]
    assert complete("nosuchcommand ") == []


def test_argument_hint_shows_usage() -> None:
    assert argument_hint("put ").startswith("put KS KEY VALUE")
    assert argument_hint("status; get") == "get KS KEY [c=ONE|QUORUM|ALL] [via=NODE]"
    assert argument_hint("") == ""


def drive(keys: str, history: Path, on_started: object | None = None) -> str:
    """Type `keys` into the real prompt; returns everything the REPL printed."""
    buffer = io.StringIO()

    async def main() -> None:
        with create_pipe_input() as pipe:
            pipe.send_text(keys)
            async with open_session(ClusterOptions(nodes=3)) as session:
                app = InteractiveApp(
                    session,
                    pt_input=pipe,
                    pt_output=DummyOutput(),
                    history=FileHistory(str(history)),
                    console=Console(file=buffer, width=120),
                )
                if callable(on_started):
                    on_started(app)
                await app.run()

    trio.run(main)
    return buffer.getvalue()


def test_commands_run_and_history_is_kept(tmp_path: Path) -> None:
    history = tmp_path / "history"
    out = drive("put kv k hello\nget kv k\nbogus\n\x04", history)
    assert "OK put kv/k" in out
    assert "hello" in out
    assert "unknown command 'bogus'" in out
    saved = history.read_text()
    assert "+put kv k hello" in saved and "+get kv k" in saved


def test_tab_completes_a_command(tmp_path: Path) -> None:
    out = drive("hea\t\n\x04", tmp_path / "h")
    assert "healed" in out


def test_ctrl_c_while_typing_clears_the_line(tmp_path: Path) -> None:
    out = drive("put half typed\x03status\n\x04", tmp_path / "h")
    assert "3/3 running" in out  # status ran
    assert "OK put" not in out and "error" not in out


def test_ctrl_c_during_a_command_cancels_only_that_command(tmp_path: Path) -> None:
    def interrupt_when_running(app: InteractiveApp) -> None:
        def watch() -> None:
            deadline = time.monotonic() + 10
            while app._command_scope is None and time.monotonic() < deadline:
                time.sleep(0.01)
            signal.raise_signal(signal.SIGINT)

        threading.Thread(target=watch, daemon=True).start()

    out = drive("sleep 60s\nput kv k after\n\x04", tmp_path / "h", interrupt_when_running)
    assert "cancelled" in out
    assert "OK put kv/k" in out  # the session went on
