"""Why a get shows siblings, in words that match the dots: two blind writes through one node have
clocks {A:1} and {A:2}, which read as if the second had seen the first; it had not."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.views_data import render_get
from tests.repl.conftest import run_lines


def shown(lines: list[str]) -> str:
    """The last line's reply as the REPL prints it."""
    import trio
    import trio.testing

    async def main() -> Any:
        async with open_session(ClusterOptions(nodes=3), "table") as session:
            for line in lines[:-1]:
                await session.run_line(line)
            (reply,) = await session.run_line(lines[-1])
            return reply

    reply = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    console = Console(width=400, record=True, color_system=None)
    console.print(render_get(reply.data))
    return console.export_text()


def test_two_blind_writes_through_one_node_are_concurrent_and_the_words_say_why() -> None:
    lines = ["put kv k 1 via=A", "put kv k 2 via=A", "get kv k c=ALL"]
    got = run_lines(lines, nodes=3)[-1]
    dots = [v["dot"] for v in got["versions"]]
    assert [v["context"] for v in got["versions"]] == [{}, {}] and len(dots) == 2
    text = shown(lines)
    first, second = (f"{actor}:{n}" for actor, n in dots)
    assert f"concurrent writes ({first} {{{first}}} ∥ {second} {{{second}}})" in text, text
    assert f"{second} was written with the context {{}}, which lacks {first}" in text, text
    assert "neither clock descends" not in text  # {A:2} does descend from {A:1}, as clocks


def test_writes_through_two_nodes_keep_the_clock_wording() -> None:
    text = shown(["put kv k 1 via=A", "put kv k 2 via=C", "get kv k c=ALL"])
    assert "neither clock descends from the other" in text and "had seen" not in text, text
