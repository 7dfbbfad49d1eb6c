"""The REPL command table: what one command declares, the table every face of the REPL reads, and
what a parsed command holds (grammar.py parses a line by the table into `Command`s).

A command is declared once, by a decorator on its handler (the dbcli `special_command` pattern):

    @TABLE.command("kill", "crash a node (memory lost, data kept)", args=(Arg(NODE),), ...)
    async def kill(session, cmd): ...

The entry holds the name and aliases, the positional arguments with their kinds, the `name=value`
options, summary, longer help, examples, the handler and the renderer. The parser, completer,
lexer, `help`, the views and the man page's REPL COMMANDS section all derive from it, so adding a
command is one decorated handler (and a renderer if its answer needs one).
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from bhandar_cli.core.model import BadInput, BhandarError
from bhandar_cli.repl.kinds import Kind

if TYPE_CHECKING:
    from rich.console import RenderableType

# The session a command runs in (repl/session.py's `Session`): the table is below it, and is told.
S = TypeVar("S")
Handler = Callable[[S, "Command"], Awaitable[Any]]
Renderer = Callable[[Any], "RenderableType"]


@dataclass(frozen=True)
class Arg:
    """A positional argument."""

    kind: Kind
    label: str = ""  # its name in the usage line; the kind's metavar when empty
    optional: bool = False
    repeats: bool = False  # takes every remaining word (the last argument only)

    def usage(self) -> str:
        label = self.label or self.kind.metavar
        return f"[{label}]" if self.optional else label


@dataclass(frozen=True)
class Option:
    """A `name=value` option."""

    name: str
    kind: Kind
    metavar: str = ""  # how the usage line shows the value; the kind's metavar when empty

    def usage(self) -> str:
        return f"[{self.name}={self.metavar or self.kind.metavar}]"


@dataclass(frozen=True)
class CommandSpec(Generic[S]):
    name: str
    summary: str  # one line, for the `help` list and completion menus
    handler: Handler[S]  # takes the session and the parsed command; talks to the cluster via client/client.py
    args: tuple[Arg, ...] = ()
    options: tuple[Option, ...] = ()
    aliases: tuple[str, ...] = ()
    help: str = ""  # the longer explanation, for `help CMD` and the man page
    examples: tuple[str, ...] = ()
    renderer: Renderer | None = None  # the table view of its answer; "ok: NAME" when None
    # The usage line, for grammars that are not one list of arguments (`keyspace create ... |
    # keyspace list`); {name}, {args} and {options} are filled in from the entry.
    usage_template: str = "{name} {args} {options}"
    # What Ctrl-C leaves behind, said after the command is cancelled: for a command whose action
    # goes on in the cluster once started (a join), where it stands and how to watch it. None: the
    # command stopped and changed nothing more ("cancelled").
    interrupted: Callable[[S, Command], str] | None = None

    def __post_init__(self) -> None:
        # Help is written as an indented triple-quoted paragraph; keep it as one line of words.
        object.__setattr__(self, "help", " ".join(self.help.split()))

    @property
    def usage(self) -> str:
        text = self.usage_template.format(
            name=self.name,
            args=" ".join(a.usage() for a in self.args),
            options=" ".join(o.usage() for o in self.options),
        )
        return " ".join(text.split())

    @property
    def min_args(self) -> int:
        return sum(not a.optional for a in self.args)

    @property
    def max_args(self) -> int | None:
        return None if any(a.repeats for a in self.args) else len(self.args)

    def arg_at(self, index: int) -> Arg | None:
        """The argument the word at `index` (counting positional words only) would be."""
        if index < len(self.args):
            return self.args[index]
        return self.args[-1] if self.args and self.args[-1].repeats else None

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)


class CommandTable(Generic[S]):
    """Commands in the order `help` lists them, found by name or alias in any case."""

    def __init__(self, specs: Iterable[CommandSpec[S]] = ()) -> None:
        self._specs: dict[str, CommandSpec[S]] = {}
        self._words: dict[str, CommandSpec[S]] = {}  # every name and alias
        for spec in specs:
            self.add(spec)

    def add(self, spec: CommandSpec[S]) -> None:
        for word in (spec.name, *spec.aliases):
            if word in self._words:
                raise BhandarError(f"REPL command table: {word!r} is declared twice")
            if word != word.lower():
                raise BhandarError(f"REPL command table: {word!r} must be lower case (lookups are)")
        self._specs[spec.name] = spec
        self._words.update(dict.fromkeys((spec.name, *spec.aliases), spec))

    def command(
        self,
        name: str,
        summary: str,
        *,
        args: tuple[Arg, ...] = (),
        options: tuple[Option, ...] = (),
        aliases: tuple[str, ...] = (),
        help: str = "",
        examples: tuple[str, ...] = (),
        renderer: Renderer | None = None,
        usage_template: str = CommandSpec.usage_template,
        interrupted: Callable[[S, Command], str] | None = None,
    ) -> Callable[[Handler[S]], Handler[S]]:
        """Declare a command: decorate its handler with everything the faces need to know."""

        def register(handler: Handler[S]) -> Handler[S]:
            self.add(
                CommandSpec(
                    name,
                    summary,
                    handler,
                    args,
                    options,
                    aliases,
                    help,
                    examples,
                    renderer,
                    usage_template=usage_template,
                    interrupted=interrupted,
                )
            )
            return handler

        return register

    def get(self, word: str) -> CommandSpec[S] | None:
        """The command a typed word names (name or alias, any case), or None."""
        return self._words.get(word.lower())

    def __iter__(self) -> Iterator[CommandSpec[S]]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def suggest(self, word: str) -> str:
        """' (did you mean X?)' for the command nearest to a mistyped word, else ''."""
        close = difflib.get_close_matches(word.lower(), list(self._words), n=1, cutoff=0.5)
        return f" (did you mean {self._words[close[0]].name}?)" if close else ""


@dataclass(frozen=True)
class Word:
    text: str  # unquoted
    raw: str  # as typed


@dataclass(frozen=True)
class Command:
    """One parsed command: its table entry, positional words and `name=value` options."""

    spec: CommandSpec[Any]
    args: tuple[Word, ...]
    options: dict[str, str] = field(default_factory=dict)
    text: str = ""

    @property
    def name(self) -> str:
        return self.spec.name

    def arg(self, i: int) -> str:
        return self.args[i].text

    def keyword(self, i: int) -> str:
        """Argument `i`, lower-cased, when it is one of its kind's words; else a usage error."""
        word = self.arg(i).lower()
        arg = self.spec.arg_at(i)
        if arg is None or word not in arg.kind.offers:
            raise BadInput(f"usage: {self.spec.usage}")
        return word
