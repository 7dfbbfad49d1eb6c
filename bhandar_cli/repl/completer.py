"""Grammar-aware completion, syntax colouring and argument hints for the interactive prompt.

What to complete at each position comes from the command table: the command names, each
argument's kind and each option's kind. Live candidates come from a `CompletionContext` snapshot
(node names, keyspaces, keys already used), which the trio side refreshes, so the prompt thread
never calls into the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.lexers import Lexer

from bhandar_cli.repl.commands import COMMANDS
from bhandar_cli.repl.kinds import Kind
from bhandar_cli.repl.table import CommandTable


@dataclass
class CompletionContext:
    """A snapshot the prompt thread can read safely."""

    nodes: list[str] = field(default_factory=list)
    keyspaces: list[str] = field(default_factory=list)
    keys: dict[str, list[str]] = field(default_factory=dict)


def _candidates(
    ctx: CompletionContext, commands: CommandTable[Any], kind: Kind, args: list[str]
) -> list[str]:
    """What to offer for a value of this kind: live candidates first, then the kind's fixed ones."""
    live: list[str] = []
    if kind.source == "nodes":
        live = ctx.nodes
    elif kind.source == "keyspaces":
        live = ctx.keyspaces
    elif kind.source == "keys" and args:
        live = ctx.keys.get(args[0], [])
    elif kind.source == "commands":
        live = list(commands.names())
    return [*live, *kind.offers]


class BhandarCompleter(Completer):
    """Completes what the command table says comes next: a command, an argument, an option."""

    def __init__(
        self, context: Callable[[], CompletionContext], commands: CommandTable[Any] = COMMANDS
    ) -> None:
        self.context = context
        self.commands = commands

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        segment = text.rsplit(";", 1)[-1]
        words = segment.split()
        current = "" if not segment or segment[-1].isspace() else (words[-1] if words else "")
        done = words if not current else words[:-1]
        if not done:
            for entry in self.commands:
                if entry.name.startswith(current.lower()):
                    yield Completion(entry.name, -len(current), display_meta=entry.summary)
            return
        spec = self.commands.get(done[0])
        if spec is None:
            return
        ctx = self.context()
        positional = [w for w in done[1:] if "=" not in w]
        if "=" in current:
            name, _, partial = current.partition("=")
            option = spec.option(name)
            values = _candidates(ctx, self.commands, option.kind, positional) if option else []
            for value in values:
                if value.lower().startswith(partial.lower()):
                    yield Completion(f"{name}={value}", -len(current), display=value)
            return
        index = len(positional)
        arg = spec.arg_at(index)
        if arg is not None:
            for cand in _candidates(ctx, self.commands, arg.kind, positional):
                if cand.lower().startswith(current.lower()):
                    yield Completion(cand, -len(current))
        if index >= spec.min_args or arg is None:
            used = {w.split("=", 1)[0] for w in done if "=" in w}
            for option in spec.options:
                if option.name not in used and option.name.startswith(current):
                    yield Completion(f"{option.name}=", -len(current), display_meta="option")


def argument_hint(text: str, commands: CommandTable[Any] = COMMANDS) -> str:
    """The usage of the command being typed (redis-cli style), or '' when there is none."""
    segment = text.rsplit(";", 1)[-1].split()
    if not segment:
        return ""
    spec = commands.get(segment[0])
    return spec.usage if spec else ""


class BhandarLexer(Lexer):
    """Colours: command words, option names, node names, JSON values and comments."""

    def __init__(self, nodes: Callable[[], list[str]], commands: CommandTable[Any] = COMMANDS) -> None:
        self.nodes = nodes
        self.commands = commands

    def lex_document(self, document: Document) -> Callable[[int], StyleAndTextTuples]:
        lines = document.lines

        def line(i: int) -> StyleAndTextTuples:
            return self._lex(lines[i])

        return line

    def _lex(self, text: str) -> StyleAndTextTuples:
        out: StyleAndTextTuples = []
        first = True
        nodes = set(self.nodes())
        i = 0
        for piece in _tokens(text):
            if piece.startswith("#") and not piece.strip("#").startswith("'"):
                out.append(("class:comment", text[i:]))
                return out
            style = ""
            word = piece.strip()
            if word == ";":
                style, first = "class:separator", True
            elif word and first:
                known = self.commands.get(word) is not None
                style, first = ("class:command" if known else "class:unknown"), False
            elif "=" in word and word.split("=", 1)[0].isalpha():
                style = "class:option"
            elif word in nodes or word == "|":
                style = "class:node"
            elif word[:1] in "[{\"'0123456789-":
                style = "class:value"
            out.append((style, piece))
            i += len(piece)
        return out


def _tokens(text: str) -> list[str]:
    """Split keeping whitespace attached, and `;` as its own token (cheap; colouring only)."""
    out: list[str] = []
    buf = ""
    quote = ""
    for ch in text:
        if quote:
            buf += ch
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
            buf += ch
        elif ch == ";":
            if buf:
                out.append(buf)
            out.append(";")
            buf = ""
        elif buf and ch.isspace() != buf[-1].isspace():
            out.append(buf)
            buf = ch
        else:
            buf += ch
    if buf:
        out.append(buf)
    return out
