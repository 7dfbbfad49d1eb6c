"""The REPL's grammar: splitting a line into commands and words, and parsing them by the command table.

One line may hold several commands separated by `;`; `#` at the start of a word begins a comment.
Words use shell-style quoting ('...', "...", backslash). Each word keeps its raw text as well, so an
unquoted JSON value such as ["rice","oil"] is taken as typed rather than with its quotes stripped.
Options are `name=value` words whose name the command's table entry declares (c=, via=, ctx=, ...);
argument counts come from the entry's arguments.
"""

from __future__ import annotations

from typing import Any

from bhandar_cli.core.model import BadInput, seconds_of
from bhandar_cli.repl.table import Command, CommandTable, Word


class ParseError(BadInput):
    """A line that does not parse: the problem, and which of the line's commands has it."""

    def __init__(self, message: str, index: int, count: int, name: str) -> None:
        super().__init__(message)
        self.index = index  # the place of the command on its line, from 1
        self.count = count  # how many commands the line holds (as far as it could be split)
        self.name = name  # the command's first word, lower-cased


def split_words(line: str) -> list[list[Word]]:
    """Split a line into commands (at `;`) of words, honouring quotes; drop `#` comments.

    An unclosed quote raises ParseError."""
    commands: list[list[Word]] = []
    words: list[Word] = []
    text: list[str] = []
    raw: list[str] = []
    quote: str | None = None
    in_word = False
    i = 0

    def end_word() -> None:
        nonlocal in_word
        if in_word:
            words.append(Word("".join(text), "".join(raw)))
            text.clear()
            raw.clear()
            in_word = False

    while i < len(line):
        ch = line[i]
        if quote:
            raw.append(ch)
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"' and i + 1 < len(line) and line[i + 1] in '"\\':
                i += 1
                raw.append(line[i])
                text.append(line[i])
            else:
                text.append(ch)
        elif ch in "'\"":
            quote, in_word = ch, True
            raw.append(ch)
        elif ch == "\\" and i + 1 < len(line):
            i += 1
            raw.append(ch + line[i])
            text.append(line[i])
            in_word = True
        elif ch.isspace():
            end_word()
        elif ch == ";":
            end_word()
            if words:
                commands.append(words)
            words = []
        elif ch == "#" and not in_word:
            break
        else:
            text.append(ch)
            raw.append(ch)
            in_word = True
        i += 1
    if quote:
        # The quote swallows the rest of the line: the command it opened is the line's last.
        name = words[0].text if words else "".join(text)
        raise ParseError(f"unclosed {quote} quote", len(commands) + 1, len(commands) + 1, name.lower())
    end_word()
    if words:
        commands.append(words)
    return commands


def parse(line: str, commands: CommandTable[Any]) -> list[Command]:
    """Parse a line into commands; raises ParseError naming the problem and the command that has it."""
    groups = split_words(line)
    parsed = []
    for index, words in enumerate(groups, 1):
        try:
            parsed.append(_command(words, commands))
        except BadInput as exc:
            raise ParseError(str(exc), index, len(groups), words[0].text.lower()) from None
    return parsed


def _command(words: list[Word], commands: CommandTable[Any]) -> Command:
    spec = commands.get(words[0].text)
    if spec is None:
        raise BadInput(
            f"unknown command {words[0].text!r}{commands.suggest(words[0].text)}; type help for the list"
        )
    args: list[Word] = []
    options: dict[str, str] = {}
    for word in words[1:]:
        name_part, eq, value = word.text.partition("=")
        if eq and spec.option(name_part) and word.raw.startswith(name_part + "="):
            options[name_part] = value
        else:
            args.append(word)
    too_many = spec.max_args is not None and len(args) > spec.max_args
    if too_many and "=" in args[-1].text:
        option = args[-1].text.split("=", 1)[0]
        names = ", ".join(f"{o.name}=" for o in spec.options)
        takes = f"it takes {names}" if spec.options else "it takes no options"
        raise BadInput(f"unknown option {option}= for {spec.name} ({takes}); usage: {spec.usage}")
    if len(args) < spec.min_args or too_many:
        raise BadInput(f"usage: {spec.usage}")
    return Command(spec, tuple(args), options, " ".join(w.raw for w in words))


MAX_DURATION = 24 * 3600.0  # seconds: a sleep or wait longer than a day is a typo


def parse_duration(text: str) -> float:
    """'2s', '500ms', '1.5', '1m', '2h' -> seconds, at most MAX_DURATION."""
    seconds = seconds_of(text)
    if seconds is None:
        raise BadInput(f"bad duration {text!r} (use e.g. 2s, 500ms, 1m)")
    if seconds > MAX_DURATION:  # also infinity: a sleep without end
        raise BadInput(f"duration {text.strip()!r} is over the limit of {MAX_DURATION / 3600:g} hours")
    return seconds


def partition_groups(args: tuple[Word, ...]) -> list[list[str]]:
    """`A B | C D E` (the `|` may touch names: `A|B`) -> [["A","B"],["C","D","E"]]."""
    joined = " ".join(w.text for w in args)
    return [group.split() for group in joined.split("|")]
