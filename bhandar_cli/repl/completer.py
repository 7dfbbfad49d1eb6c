"""Grammar-aware completion, syntax colouring and argument hints for the interactive prompt.

Everything here reads a `CompletionContext` snapshot (node names, keyspaces, keys already used),
which the trio side refreshes, so the prompt thread never calls into the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.lexers import Lexer

from bhandar_cli.repl.grammar import ALIASES, COMMANDS

LEVELS = ("ONE", "QUORUM", "ALL")
OPTION_VALUES: dict[str, tuple[str, ...]] = {
    "c": LEVELS,
    "ctx": ("auto", "none"),
    "policy": ("siblings", "lww", "counter"),
    "quorum": ("sloppy", "strict"),
    "n": ("1", "2", "3", "5"),
    "timeout": ("5s", "10s", "30s"),
}
# What each positional argument of a command is, to know what to offer there.
ARG_KINDS: dict[str, tuple[str, ...]] = {
    "put": ("keyspace", "key", "value"),
    "get": ("keyspace", "key"),
    "delete": ("keyspace", "key"),
    "incr": ("keyspace", "key", "delta"),
    "keyspace": ("keyspace-verb", "new-keyspace"),
    "prefs": ("keyspace", "key"),
    "clock": ("keyspace", "key"),
    "merkle": ("node", "node"),
    "partition": ("node*",),
    "kill": ("node",),
    "revive": ("node",),
    "add": ("new-node",),
    "decommission": ("node",),
    "delay": ("node", "ms"),
    "repair": ("node",),
    "flush": ("node",),
    "compact": ("node",),
    "trace": ("on-off",),
    "consistency": ("level",),
    "output": ("format",),
    "wait": ("converged",),
    "help": ("command",),
    "sleep": ("duration",),
}
FIXED: dict[str, tuple[str, ...]] = {
    "keyspace-verb": ("create", "list"),
    "on-off": ("on", "off"),
    "level": LEVELS,
    "format": ("table", "json"),
    "converged": ("converged",),
    "command": tuple(COMMANDS),
    "duration": ("1s", "2s", "3s", "500ms"),
    "ms": ("0", "50", "200", "1000"),
}


@dataclass
class CompletionContext:
    """A snapshot the prompt thread can read safely."""

    nodes: list[str] = field(default_factory=list)
    keyspaces: list[str] = field(default_factory=list)
    keys: dict[str, list[str]] = field(default_factory=dict)


def _candidates(ctx: CompletionContext, kind: str, args: list[str]) -> Iterable[str]:
    if kind in FIXED:
        return FIXED[kind]
    if kind in ("node", "node*"):
        return [*ctx.nodes, "|"] if kind == "node*" else ctx.nodes
    if kind == "keyspace":
        return ctx.keyspaces
    if kind == "key" and args:
        return ctx.keys.get(args[0], [])
    return ()


class BhandarCompleter(Completer):
    def __init__(self, context: Callable[[], CompletionContext]) -> None:
        self.context = context

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        segment = text.rsplit(";", 1)[-1]
        words = segment.split()
        current = "" if not segment or segment[-1].isspace() else (words[-1] if words else "")
        done = words if not current else words[:-1]
        if not done:
            for name in COMMANDS:
                if name.startswith(current.lower()):
                    yield Completion(name, -len(current), display_meta=COMMANDS[name].summary)
            return
        command = ALIASES.get(done[0].lower(), done[0].lower())
        spec = COMMANDS.get(command)
        if spec is None:
            return
        ctx = self.context()
        if "=" in current:
            name, _, partial = current.partition("=")
            values = ctx.nodes if name in ("via", "from") else OPTION_VALUES.get(name, ())
            for value in values:
                if value.lower().startswith(partial.lower()):
                    yield Completion(f"{name}={value}", -len(current), display=value)
            return
        positional = [w for w in done[1:] if "=" not in w]
        kinds = ARG_KINDS.get(command, ())
        index = len(positional)
        kind = (
            kinds[-1] if kinds and kinds[-1].endswith("*") else (kinds[index] if index < len(kinds) else None)
        )
        if kind is not None:
            for cand in _candidates(ctx, kind, positional):
                if cand.lower().startswith(current.lower()):
                    yield Completion(cand, -len(current))
        if index >= spec.min_args or kind is None:
            used = {w.split("=", 1)[0] for w in done if "=" in w}
            for option in spec.options:
                if option not in used and option.startswith(current):
                    yield Completion(f"{option}=", -len(current), display_meta="option")


def argument_hint(text: str) -> str:
    """The usage of the command being typed (redis-cli style), or '' when there is none."""
    segment = text.rsplit(";", 1)[-1].split()
    if not segment:
        return ""
    spec = COMMANDS.get(ALIASES.get(segment[0].lower(), segment[0].lower()))
    return spec.usage if spec else ""


class BhandarLexer(Lexer):
    """Colours: command words, option names, node names, JSON values and comments."""

    def __init__(self, nodes: Callable[[], list[str]]) -> None:
        self.nodes = nodes

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
                known = ALIASES.get(word.lower(), word.lower()) in COMMANDS
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
