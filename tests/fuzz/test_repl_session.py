"""Fuzz the in-process REPL session: grammar-aware lines run against a real cluster on trio's
virtual clock. No line may end in an internal error (the session turns a bug into one rather than
dying, so the test looks for them), every reply renders as a table and as JSON, and afterwards the
session still serves a write and a read."""

from __future__ import annotations

import io
import json

import trio
import trio.testing
from hypothesis import example, given
from hypothesis import strategies as st
from rich.console import Console

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.session import Reply
from bhandar_cli.repl.views import print_reply

from .conftest import fuzz_settings
from .repl_lines import lines

# A fresh three-node cluster per example (on disk, so snapshots and restores run for real).
OPTIONS = ClusterOptions(nodes=3, zones=3, vnodes=4)
NODES = ("A", "B", "C")


def check_reply(reply: Reply) -> None:
    shape = reply.to_json()
    assert json.loads(json.dumps(shape)) == shape
    if not reply.ok:
        assert shape["code"] != "internal", f"{reply.cmd}: {shape['error']}"
    for output in ("table", "json"):
        print_reply(Console(file=io.StringIO(), width=100), reply, output)


async def run(script: list[str]) -> None:
    async with open_session(OPTIONS, "json") as session:
        for line in script:
            for reply in await session.run_line(line):
                check_reply(reply)
        # Still serving: undo the faults a script may have injected, then write and read.
        session.quit = False
        for line in ["heal", *(f"revive {n}" for n in NODES), "consistency QUORUM"]:
            for reply in await session.run_line(line):
                check_reply(reply)
        for line in ["put kv fuzz-probe 1 c=ONE", "get kv fuzz-probe c=ONE"]:
            (reply,) = await session.run_line(line)
            assert reply.ok, reply.to_json()


@fuzz_settings(0.1)
@given(script=st.lists(lines(), min_size=1, max_size=8))
@example(script=["snapshot a\x00b"]).via("a snapshot name with a NUL byte")
@example(script=["snapshot ../../escape", "restore ../../escape"]).via("a name that leaves the data dir")
def test_arbitrary_lines_never_break_the_session(script: list[str]) -> None:
    trio.run(run, script, clock=trio.testing.MockClock(autojump_threshold=0))
