"""What a node process's log says: its last lines (why it did not start), and the words it ended
its last life with (why it is down: `cluster status` and `status` over `repl --connect` show them).

A node's log collects every life of the process: each starts with a `--- starting node X` line
(supervisor.spawn), and a node that stops on its own (a full disk, a bug) ends with one line,
`bhandar: node X ...`, saying why and what to do (cli/node_cmd.py). A node killed with SIGKILL, or one
that was asked to stop, says nothing of the kind.
"""

from __future__ import annotations

from pathlib import Path

from bhandar_cli.core import NodeInfo

START_MARK = "--- starting node "
EXIT_MARK = "bhandar: "
TAIL_BYTES = 64 * 1024  # the end of a long log: where its last life's last words are


def log_tail(log: str, lines: int = 5) -> str:
    """The log's last non-empty lines, on one line ("(no log)" when it cannot be read)."""
    try:
        text = Path(log).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(tail) if tail else "(empty log)"


def last_words(log: str, node: str) -> str | None:
    """Why `node`'s last life ended, if it said so as it stopped (without its leading `node X`, as
    an in-process node's reason reads); None otherwise."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - TAIL_BYTES))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    life = text.rsplit(START_MARK, 1)[-1]
    said = [line for line in life.splitlines() if line.startswith(EXIT_MARK)]
    return said[-1].removeprefix(EXIT_MARK).removeprefix(f"node {node} ") if said else None


def with_last_words(info: NodeInfo, log: str) -> NodeInfo:
    """A down node's info, with why it stopped (`crashed`) when it said so."""
    words = last_words(log, info["id"])
    return info if words is None else {**info, "crashed": words}
