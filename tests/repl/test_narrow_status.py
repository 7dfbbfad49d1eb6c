"""`status` in a narrow terminal keeps its headings whole (issue 41: at 50 columns the REPL printed
`sta… no… zo…`): the REPL's table rendering, at 50 columns, of a real cluster's status with a
node down and a partition (long `sees down` cells), and with the protocol column node processes add."""

from __future__ import annotations

import dataclasses
import io
import itertools
import re

import pytest
import trio
import trio.testing
from rich.console import Console

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.session import Reply
from bhandar_cli.repl.views import print_reply

HEADINGS = ("state", "node", "zone", "tokens", "owns", "keys", "hints", "sees down", "config")


def status_reply() -> Reply:
    async def main() -> Reply:
        async with open_session(ClusterOptions(), "table") as session:
            for line in ("kill C", "partition A | B", "sleep 5s"):
                await session.run_line(line)
            (reply,) = await session.run_line("status")
            return reply

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def printed(reply: Reply, width: int) -> list[str]:
    out = io.StringIO()
    print_reply(Console(file=out, width=width, color_system=None), reply, "table")
    return out.getvalue().splitlines()


def headings_of(lines: list[str]) -> list[str]:
    """The words of the heading lines (those just above a rule of ─)."""
    heads = [above for above, line in itertools.pairwise(lines) if line.startswith("─")]
    return [word for above in heads for word in re.split(r"\s{2,}", above.strip())]


@pytest.mark.parametrize("processes", [False, True], ids=["in-process", "node processes"])
def test_status_headings_stay_whole_at_50_columns(processes: bool) -> None:
    reply = status_reply()
    assert reply.ok
    if processes:  # what a process cluster's status adds: each node's wire protocol
        data = {**reply.data, "nodes": [{**n, "protocol": 5} for n in reply.data["nodes"]]}
        reply = dataclasses.replace(reply, data=data)
    expected = [*HEADINGS, *(["protocol"] if processes else [])]
    lines = printed(reply, 50)
    assert all(len(line) <= 50 for line in lines)
    assert not any("…" in line for line in lines), "\n".join(lines)
    assert sorted(set(headings_of(lines))) == sorted(expected), "\n".join(lines)
    assert any(line.split()[:2] == ["partitioned", "A"] for line in lines), "\n".join(lines)
    # Wide enough, it stays one table, a row per node with every column.
    wide = printed(reply, 120)
    assert headings_of(wide) == expected
