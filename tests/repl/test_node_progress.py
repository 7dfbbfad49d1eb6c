"""Progress of a rolling operation (cluster upgrade, config set). A one-shot command's goes to
stderr: on a terminal one line per node that its phases overwrite (a rollback keeps its own), in a
pipe a line a phase. The interactive REPL's goes through its terminal."""

from __future__ import annotations

import io
from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.terminal import Terminal as ReplTerminal
from bhandar_cli.repl.views_ops import node_progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def events() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for node in "AB":
        out += [{"node": node, "phase": p, "elapsed": 0.5} for p in ("check", "stop", "start", "done")]
    out += [{"what": "config", "node": "C", "phase": "watch", "elapsed": 1.0}]
    out += [{"what": "config", "node": "C", "phase": "rollback", "elapsed": 1.2, "version": 0}]
    out += [{"what": "config", "node": "C", "phase": "recovered", "elapsed": 3.0}]
    return out


def shown_lines(written: str) -> list[str]:
    """What a terminal shows: each carriage return and erase starts the line again."""
    return [line.split("\r\x1b[2K")[-1] for line in written.split("\n") if line]


def test_on_a_terminal_each_node_keeps_one_line_and_a_rollback_its_own() -> None:
    stream = Terminal()
    with node_progress(stream) as progress:
        for event in events():
            progress(event)
    assert stream.getvalue().endswith("\n")
    assert shown_lines(stream.getvalue()) == [
        "upgrade: A done (0.5 s)",
        "upgrade: B done (0.5 s)",
        "config: C rollback (1.2 s) version=0",
        "config: C recovered (3.0 s)",
    ]


def test_in_a_pipe_every_phase_is_a_line() -> None:
    stream = io.StringIO()
    with node_progress(stream) as progress:
        for event in events():
            progress(event)
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(events()) and "\r" not in stream.getvalue()
    assert lines[1] == "upgrade: A stop (0.5 s)"


def test_the_repls_rolling_operations_show_their_progress_through_its_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In the interactive REPL a rollout's progress goes through the terminal that keeps the
    prompt intact (a rollout started from the web page's command box runs while a prompt is
    shown), not straight to stderr."""
    stream = io.StringIO()

    async def main() -> dict[str, Any]:
        async with open_session(ClusterOptions(), "json") as session:
            session.terminal = ReplTerminal(stream=stream, width=120)
            (reply,) = await session.run_line("config set phi_threshold 10 window=0.2s")
            return reply.to_json()

    out = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert out["ok"], out
    lines = stream.getvalue().splitlines()
    assert {line.split()[1] for line in lines} == set("ABCDE")
    assert all(line.startswith("config: ") for line in lines), lines
    assert capsys.readouterr().err == ""
