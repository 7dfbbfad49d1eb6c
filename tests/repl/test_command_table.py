"""The command table and the faces derived from it (parser, completer, lexer, help) cannot drift.

Every face reads `repl.commands.COMMANDS`; these tests check each entry is complete, that every
face shows every command and option, and that a command added to a table in a test is parsed,
completed, coloured and explained with no other change.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from rich.console import Console
from rich.text import Text

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.core.model.config import LEVELS, POLICIES, QUORUM_MODES
from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.commands import COMMANDS
from bhandar_cli.repl.completer import BhandarCompleter, BhandarLexer, CompletionContext, argument_hint
from bhandar_cli.repl.grammar import parse
from bhandar_cli.repl.kinds import DURATION, LEVEL, NODE
from bhandar_cli.repl.session import Session
from bhandar_cli.repl.table import Arg, Command, CommandSpec, CommandTable, Option
from bhandar_cli.repl.views import render

ROOT = Path(__file__).resolve().parent.parent.parent
CTX = CompletionContext(["A", "B", "C"], ["carts"], {"carts": ["cart:42"]})


def complete(text: str, commands: CommandTable[Any] = COMMANDS) -> list[str]:
    completer = BhandarCompleter(lambda: CTX, commands)
    return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]


def filled(spec: CommandSpec[Any]) -> str:
    """The command with its required arguments given (each its first candidate, else `x`)."""
    words = [spec.name]
    for arg in spec.args[: spec.min_args]:
        words.append(next(iter(arg.kind.offers), "x"))
    return " ".join(words) + " "


@pytest.mark.parametrize("spec", list(COMMANDS), ids=lambda s: s.name)
def test_every_entry_declares_everything_its_faces_show(spec: CommandSpec[Any]) -> None:
    assert inspect.iscoroutinefunction(spec.handler), spec.name
    assert spec.summary and spec.help and spec.renderer is not None
    assert spec.usage.split()[0] == spec.name
    for example in spec.examples:
        # An example may set the scene first (`snapshot before; restore before`): it ends with this command.
        *_, command = parse(example, COMMANDS)
        assert command.name == spec.name, example


def test_names_and_aliases_resolve_in_any_case() -> None:
    assert [COMMANDS.get(w).name for w in ("PUT", "set", "Del", "?", "exit")] == [  # type: ignore[union-attr]
        "put",
        "put",
        "delete",
        "help",
        "quit",
    ]
    assert COMMANDS.get("nosuch") is None
    with pytest.raises(Exception, match="declared twice"):
        CommandTable([*COMMANDS, next(iter(COMMANDS))])


def test_completer_offers_every_command_and_every_option() -> None:
    assert complete("") == list(COMMANDS.names())
    for spec in COMMANDS:
        offered = {c for c in complete(filled(spec)) if c.endswith("=")}
        assert offered == {f"{o.name}=" for o in spec.options}, spec.name


def test_option_values_come_from_the_declared_sets() -> None:
    assert complete("get carts cart:42 c=") == [f"c={level}" for level in LEVELS]
    assert complete("keyspace create x policy=") == [f"policy={p}" for p in POLICIES]
    assert complete("keyspace create x quorum=") == [f"quorum={q}" for q in QUORUM_MODES]
    assert complete("consistency ") == list(LEVELS)
    assert complete("help ") == list(COMMANDS.names())


def first_style(lexer: BhandarLexer, line: str) -> str:
    return lexer.lex_document(Document(line))(0)[0][0]


def test_lexer_colours_every_name_and_alias_as_a_command() -> None:
    lexer = BhandarLexer(lambda: [])
    for word in [w for spec in COMMANDS for w in (spec.name, *spec.aliases)]:
        assert first_style(lexer, word) == "class:command", word
    assert first_style(lexer, "nosuch") == "class:unknown"


def test_usage_lines_spell_the_declared_levels_policies_and_modes() -> None:
    assert f"[c={'|'.join(LEVELS)}]" in COMMANDS.get("get").usage  # type: ignore[union-attr]
    keyspace = COMMANDS.get("keyspace").usage  # type: ignore[union-attr]
    assert f"[policy={'|'.join(POLICIES)}]" in keyspace and f"[quorum={'|'.join(QUORUM_MODES)}]" in keyspace


# The sets declared in core/model/config.py and core/model/errors.py, as they would be copied by hand.
COPIES = [
    r'"ONE",\s*"QUORUM",\s*"ALL"',
    r"ONE\|QUORUM\|ALL",
    r"ONE, QUORUM or ALL",
    r'"siblings",\s*"lww",\s*"counter"',
    r"siblings\|lww\|counter",
    r"use siblings, lww or counter",
    r'"sloppy",\s*"strict"',
    r"sloppy\|strict",
    r"use sloppy or strict",
    r"unavailable\|timeout",
    r'"bad_input",\s*"too_large",\s*"unknown_keyspace"',
]
DECLARED_IN = {"bhandar_cli/core/model/config.py", "bhandar_cli/core/model/errors.py"}


def test_levels_policies_modes_and_error_codes_are_spelled_only_where_declared() -> None:
    sources = [*ROOT.glob("bhandar_cli/**/*.py"), *ROOT.glob("scripts/*.py")]
    assert len(sources) > 50
    copies = [
        f"{path.relative_to(ROOT)}: {pattern}"
        for path in sources
        if str(path.relative_to(ROOT)) not in DECLARED_IN
        for pattern in COPIES
        if re.search(pattern, path.read_text(encoding="utf-8"))
    ]
    assert copies == []
    declared = "".join((ROOT / p).read_text(encoding="utf-8") for p in DECLARED_IN)
    assert all(re.search(p, declared) for p in (COPIES[0], COPIES[6], COPIES[-1])), "patterns match nothing"


# --- a command added to a table in a test --------------------------------------------------------


def with_echo() -> CommandTable[Any]:
    """The real table plus `echo`, declared here and nowhere else."""
    table = CommandTable(COMMANDS)

    @table.command(
        "echo",
        "say a node's name back",
        args=(Arg(NODE), Arg(DURATION, optional=True)),
        options=(Option("c", LEVEL),),
        aliases=("say",),
        help="Answers with the node and the level it was given.",
        examples=("echo A 2s c=ONE",),
        renderer=lambda data: Text(f"echo {data['node']}"),
    )
    async def echo(session: Session, cmd: Command) -> dict[str, Any]:
        return {"cmd": "echo", "ok": True, "node": cmd.arg(0), "level": cmd.options.get("c")}

    return table


def test_an_added_command_parses_with_its_counts_and_options() -> None:
    table = with_echo()
    (cmd,) = parse("SAY B 2s c=ALL", table)
    assert (cmd.name, [w.text for w in cmd.args], cmd.options) == ("echo", ["B", "2s"], {"c": "ALL"})
    usage = "echo NODE [DURATION] [c=ONE|QUORUM|ALL]"
    for line, error in [
        ("echo", f"usage: {usage}"),
        ("echo A 2s 3s", f"usage: {usage}"),
        ("echo A 2s via=B", f"unknown option via= for echo (it takes c=); usage: {usage}"),
        ("ecoh A", "unknown command 'ecoh' (did you mean echo?); type help for the list"),
    ]:
        with pytest.raises(BadInput) as caught:
            parse(line, table)
        assert str(caught.value) == error
    with pytest.raises(BadInput, match="unknown command 'echo'"):
        parse("echo A", COMMANDS)


def test_an_added_command_is_completed_coloured_and_hinted() -> None:
    table = with_echo()
    assert complete("ec", table) == ["echo"] and complete("ec") == []
    assert complete("echo ", table) == ["A", "B", "C"]
    assert complete("say A ", table) == [*DURATION.offers, "c="]
    assert complete("echo A c=Q", table) == ["c=QUORUM"]
    assert argument_hint("status; echo ", table) == "echo NODE [DURATION] [c=ONE|QUORUM|ALL]"
    assert first_style(BhandarLexer(lambda: [], table), "echo A") == "class:command"


def test_an_added_command_runs_and_is_in_help() -> None:
    table = with_echo()

    async def main() -> list[Any]:
        async with open_session(ClusterOptions(nodes=3, memory=True), "json") as session:
            session.commands = table
            return [r for line in ("help", "help say", "echo B c=ONE") for r in await session.run_line(line)]

    listing, explained, echoed = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert [c["name"] for c in listing.data["commands"]] == [*COMMANDS.names(), "echo"]
    assert explained.data["usage"] == "echo NODE [DURATION] [c=ONE|QUORUM|ALL]"
    assert explained.data["help"] == "Answers with the node and the level it was given."
    assert explained.data["aliases"] == ["say"] and explained.data["examples"] == ["echo A 2s c=ONE"]
    assert echoed.ok and echoed.to_json() == {"cmd": "echo", "ok": True, "node": "B", "level": "ONE"}
    console = Console(width=80, record=True)
    console.print(render(echoed, table))
    assert console.export_text().strip() == "echo B"
    console.print(render(echoed))  # a table without echo has no renderer for it
    assert console.export_text().strip() == "ok: echo"
