"""The REPL's command grammar: splitting a line into commands and words, and the command table.

One line may hold several commands separated by `;`; `#` at the start of a word begins a comment.
Words use shell-style quoting ('...', "...", backslash). Each word keeps its raw text as well, so an
unquoted JSON value such as ["rice","oil"] is taken as typed rather than with its quotes stripped.
Options are `name=value` words whose name the command knows (c=, via=, ctx=, ...).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from bhandar_cli.core.errors import BadInput


@dataclass(frozen=True)
class Word:
    text: str  # unquoted
    raw: str  # as typed


@dataclass(frozen=True)
class CommandSpec:
    name: str
    usage: str
    summary: str
    options: tuple[str, ...] = ()
    min_args: int = 0
    max_args: int | None = 0
    examples: tuple[str, ...] = ()


@dataclass
class Command:
    name: str
    args: list[Word]
    options: dict[str, str] = field(default_factory=dict)
    text: str = ""

    def arg(self, i: int) -> str:
        return self.args[i].text


def _spec(name: str, usage: str, summary: str, *examples: str, **kw: object) -> CommandSpec:
    return CommandSpec(name, usage, summary, examples=examples, **kw)  # type: ignore[arg-type]


DATA_OPTS = ("c", "via")
COMMANDS: dict[str, CommandSpec] = {
    s.name: s
    for s in (
        _spec(
            "put",
            "put KS KEY VALUE [ctx=TOKEN|auto|none] [c=ONE|QUORUM|ALL] [via=NODE]",
            "write a value (a JSON literal, else a bare string)",
            "put carts cart:42 '[\"rice\"]'",
            'put carts cart:42 \'["rice","oil"]\' via=A c=ONE',
            options=("ctx", *DATA_OPTS),
            min_args=3,
            max_args=3,
        ),
        _spec(
            "get",
            "get KS KEY [c=ONE|QUORUM|ALL] [via=NODE]",
            "read every sibling and the causal context",
            "get carts cart:42",
            "get carts cart:42 c=ALL",
            options=DATA_OPTS,
            min_args=2,
            max_args=2,
        ),
        _spec(
            "delete",
            "delete KS KEY [ctx=TOKEN|auto|none] [c=...] [via=NODE]",
            "delete (writes a tombstone)",
            "delete carts cart:42",
            options=("ctx", *DATA_OPTS),
            min_args=2,
            max_args=2,
        ),
        _spec(
            "incr",
            "incr KS KEY [DELTA] [id=REQUEST_ID] [c=...] [via=NODE]",
            "add to a PN-Counter (a retried id counts once)",
            "incr counters visits",
            "incr counters visits -3 id=r1",
            options=("id", *DATA_OPTS),
            min_args=2,
            max_args=3,
        ),
        _spec(
            "keyspace",
            "keyspace create NAME [policy=siblings|lww|counter] [n=3] [quorum=sloppy|strict] | keyspace list",
            "create or list keyspaces",
            "keyspace create prices policy=lww",
            "keyspace list",
            options=("policy", "n", "quorum"),
            min_args=1,
            max_args=2,
        ),
        _spec("status", "status", "nodes: up/down, zone, tokens, ownership, keys, hints"),
        _spec("ring", "ring", "token ranges, owners and ownership per node"),
        _spec(
            "prefs",
            "prefs KS KEY",
            "the key's token, replicas (with zones) and fallbacks",
            "prefs carts cart:42",
            min_args=2,
            max_args=2,
        ),
        _spec(
            "clock",
            "clock KS KEY",
            "what each replica holds, with descends/concurrent relations",
            "clock carts cart:42",
            min_args=2,
            max_args=2,
        ),
        _spec(
            "merkle",
            "merkle NODE NODE",
            "compare two replicas' Merkle trees",
            "merkle A B",
            min_args=2,
            max_args=2,
        ),
        _spec("hints", "hints", "hinted-handoff queues: holder, target, count, oldest"),
        _spec("members", "members [from=NODE]", "the gossip membership view of one node", options=("from",)),
        _spec("metrics", "metrics", "latency per operation and level, success, stale reads, repairs, hints"),
        _spec(
            "partition",
            "partition A B | C D E",
            "split the network (unlisted nodes form one more group)",
            "partition A | B C",
            min_args=1,
            max_args=None,
        ),
        _spec("heal", "heal", "remove every partition"),
        _spec("kill", "kill NODE", "crash a node (memory lost, data kept)", "kill C", min_args=1, max_args=1),
        _spec("revive", "revive NODE", "restart a killed node", "revive C", min_args=1, max_args=1),
        _spec("add", "add NODE [zone=Z]", "bootstrap a new node", options=("zone",), min_args=1, max_args=1),
        _spec(
            "decommission",
            "decommission NODE",
            "stream a node's ranges away and remove it",
            min_args=1,
            max_args=1,
        ),
        _spec(
            "delay",
            "delay NODE MS",
            "add latency to every message of a node (0 removes it)",
            "delay B 200",
            min_args=2,
            max_args=2,
        ),
        _spec("repair", "repair [NODE]", "run anti-entropy now", max_args=1),
        _spec("flush", "flush [NODE]", "flush memtables to SSTables", max_args=1),
        _spec("compact", "compact [NODE]", "compact SSTables", max_args=1),
        _spec(
            "snapshot", "snapshot NAME", "flush and hard-link every node's SSTables", min_args=1, max_args=1
        ),
        _spec("restore", "restore NAME", "restore a snapshot, then repair", min_args=1, max_args=1),
        _spec("upgrade", "upgrade", "rolling restart, one node at a time"),
        _spec(
            "trace",
            "trace on|off",
            "show per-replica steps after each data command",
            "trace on",
            min_args=1,
            max_args=1,
        ),
        _spec(
            "consistency",
            "consistency [ONE|QUORUM|ALL]",
            "show or set the default level",
            "consistency ONE",
            max_args=1,
        ),
        _spec(
            "output", "output table|json", "switch the output format", "output json", min_args=1, max_args=1
        ),
        _spec("sleep", "sleep DURATION", "wait (2s, 500ms, 1m)", "sleep 2s", min_args=1, max_args=1),
        _spec(
            "wait",
            "wait converged [timeout=DURATION]",
            "wait until hints are delivered and live replicas agree",
            "wait converged timeout=10s",
            options=("timeout",),
            min_args=1,
            max_args=1,
        ),
        _spec("help", "help [CMD]", "list commands, or explain one", "help put", max_args=1),
        _spec("quit", "quit", "stop the cluster and leave"),
    )
}
ALIASES = {"exit": "quit", "del": "delete", "?": "help", "set": "put"}


def split_words(line: str) -> list[list[Word]]:
    """Split a line into commands (at `;`) of words, honouring quotes; drop `#` comments."""
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
        raise BadInput(f"unclosed {quote} quote")
    end_word()
    if words:
        commands.append(words)
    return commands


def parse(line: str) -> list[Command]:
    """Parse a line into commands; raises BadInput naming the problem (and the nearest command)."""
    return [_command(words) for words in split_words(line)]


def _command(words: list[Word]) -> Command:
    name = words[0].text.lower()
    name = ALIASES.get(name, name)
    spec = COMMANDS.get(name)
    if spec is None:
        raise BadInput(f"unknown command {words[0].text!r}{suggest(words[0].text)}; type help for the list")
    args: list[Word] = []
    options: dict[str, str] = {}
    for word in words[1:]:
        name_part, eq, value = word.text.partition("=")
        if eq and name_part in spec.options and word.raw.startswith(name_part + "="):
            options[name_part] = value
        else:
            args.append(word)
    too_many = spec.max_args is not None and len(args) > spec.max_args
    if too_many and "=" in args[-1].text:
        option = args[-1].text.split("=", 1)[0]
        takes = f"it takes {_opts(spec)}" if spec.options else "it takes no options"
        raise BadInput(f"unknown option {option}= for {spec.name} ({takes}); usage: {spec.usage}")
    if len(args) < spec.min_args or too_many:
        raise BadInput(f"usage: {spec.usage}")
    return Command(name, args, options, " ".join(w.raw for w in words))


def _opts(spec: CommandSpec) -> str:
    return ", ".join(f"{o}=" for o in spec.options)


def suggest(word: str) -> str:
    close = difflib.get_close_matches(word.lower(), [*COMMANDS, *ALIASES], n=1, cutoff=0.5)
    return f" (did you mean {ALIASES.get(close[0], close[0])}?)" if close else ""


def parse_duration(text: str) -> float:
    """'2s', '500ms', '1.5', '1m' -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*", text)
    if not match:
        raise BadInput(f"bad duration {text!r} (use e.g. 2s, 500ms, 1m)")
    value = float(match.group(1))
    unit = match.group(2) or "s"
    return value / 1000.0 if unit == "ms" else value * 60.0 if unit == "m" else value


def partition_groups(args: list[Word]) -> list[list[str]]:
    """`A B | C D E` (the `|` may touch names: `A|B`) -> [["A","B"],["C","D","E"]]."""
    joined = " ".join(w.text for w in args)
    return [group.split() for group in joined.split("|")]
