"""A grammar-aware strategy for REPL lines: real command words, arguments of each argument's kind
and `name=value` options from the command table, with odd values, quoting and several commands
joined by `;`. Durations stay short, so a session on the virtual clock does not tick for hours."""

from __future__ import annotations

import shlex
from typing import Any

from hypothesis import strategies as st

from bhandar_cli.repl.commands import COMMANDS
from bhandar_cli.repl.table import CommandSpec

odd_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=10)
node_names = st.sampled_from(["A", "B", "C", "D", "Z", "a", "", "A|B", "F-1", "é"]) | odd_text
durations = st.sampled_from(["0", "0s", "1ms", "250ms", "1s", "2", "-1s", "1.5x", "1e3", ""]) | odd_text

# Values per argument or option kind, by the kind's name (repl/kinds.py).
BY_KIND: dict[str, st.SearchStrategy[str]] = {
    "keyspace": st.sampled_from(["kv", "counters", "web", "nope", "KV", ""]) | odd_text,
    "new-keyspace": st.sampled_from(["fuzz", "kv", "a" * 70, "x/y", ""]) | odd_text,
    "key": st.sampled_from(["k", "a/b", "", " ", "k" * 300]) | odd_text,
    "value": st.sampled_from(["1", '"x"', "[1,2]", '{"a":1}', '{"a":', "nan", "1e999", "[" * 70]) | odd_text,
    "integer": st.sampled_from(["1", "-5", "0", "9" * 30, "1e3", "x"]) | odd_text,
    "node": node_names,
    "new-node": node_names,
    "node-groups": st.sampled_from(["A B | C", "A|B", "|", "A", "A B C | A"]) | node_names,
    "zone": st.sampled_from(["z1", "z9", ""]) | odd_text,
    "name": st.sampled_from(["snap", "../up", "/abs", "a\x00b", ".", ""]) | odd_text,
    "milliseconds": st.sampled_from(["0", "50", "-1", "1e9", "nan", "x"]),
    "duration": durations,
    "context": st.sampled_from(["auto", "none", "", "oWFBAQ", "AAAA", "%%%"]) | odd_text,
    "replicas": st.sampled_from(["1", "3", "0", "-1", "100", "x"]),
    "request-id": st.sampled_from(["r1", "", "x" * 200]) | odd_text,
    "command": st.sampled_from([*COMMANDS.names(), "nope", "?"]),
    "level": st.sampled_from(["ONE", "QUORUM", "ALL", "one", "TWO", ""]),
    "policy": st.sampled_from(["siblings", "lww", "counter", "x"]),
    "quorum": st.sampled_from(["sloppy", "strict", "x"]),
    "keyword": st.sampled_from(["create", "list", "on", "off", "converged", "table", "json", "x"]),
}


def _value(kind: str) -> st.SearchStrategy[str]:
    return BY_KIND.get(kind, odd_text)


@st.composite
def command_text(draw: st.DrawFn, spec: CommandSpec[Any]) -> str:
    word = draw(st.sampled_from([spec.name, *spec.aliases]))
    if draw(st.booleans()):
        word = word.upper()
    words = [word]
    count = draw(st.integers(0, len(spec.args) + 1))
    for i in range(count):
        arg = spec.arg_at(i)
        words.append(draw(_value(arg.kind.name) if arg else odd_text))
    for option in draw(st.lists(st.sampled_from(spec.options), max_size=3)) if spec.options else ():
        words.append(f"{option.name}={draw(_value(option.kind.name))}")
    # Quote some words as a user would, leave others raw (the grammar keeps both forms).
    return " ".join(shlex.quote(w) if draw(st.booleans()) else w for w in words)


def commands(*excluded: str) -> st.SearchStrategy[str]:
    specs = [s for s in COMMANDS if s.name not in excluded]
    return st.sampled_from(specs).flatmap(command_text)


def lines(*excluded: str) -> st.SearchStrategy[str]:
    """One line: a command, sometimes several joined by `;`, sometimes with a trailing comment."""
    return st.builds(
        lambda cmds, comment: "; ".join(cmds) + comment,
        st.lists(commands(*excluded), min_size=1, max_size=3),
        st.sampled_from(["", " # a comment", "#", ";"]),
    )
