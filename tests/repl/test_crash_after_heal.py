"""Issue 38: a crash after a healed partition goes unseen for minutes.

What a user ran on the real clock: `partition A B | C D E; sleep 60s; heal; sleep 4s; kill B;
sleep 10s; status; put kv cart:7 tea; hints; get kv cart:7 c=ALL`. C, D and E still saw B up
(phi 0.34 fifteen seconds later), the put went to the dead B and left no hint, the read at ALL
timed out, and no `· down:` notice came. The partition's 60 s of silence had become one sample of
their failure detectors' history of B.

Here on a virtual clock, after `sleep 1s`: on a real clock the nodes have gossiped by the time a
person types `partition`. Without it the partition cuts them off before their first gossip round,
C's first news of B's current life comes after the heal and starts a fresh history (a new
generation), and the bug hides, which is why `repl --virtual-time` was prompt.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
import trio
import trio.testing
from rich.console import Console, RenderableType

from bhandar_cli.client.backend import Backend
from bhandar_cli.client.cluster_health import Notices, cluster_health
from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.views import render

BEFORE_KILL = ["sleep 1s", "partition A B | C D E", "sleep 60s", "heal", "sleep 4s"]
AFTER = ["status", "put kv cart:7 tea", "hints", "get kv cart:7 c=ALL"]


Outcome = tuple[dict[str, float], list[str], dict[str, dict[str, Any]], dict[str, Any]]


@pytest.fixture(scope="module")
def scenario() -> Outcome:
    """When each of C, D and E saw B down after the kill (virtual seconds, within 10 s), the
    notices the interactive REPL prints meanwhile, the replies of the commands after, and what
    `members from=C` said half a second after the kill."""

    async def main() -> Outcome:
        async with open_session(ClusterOptions(memory=True), "json") as session:
            backend = session.client.backend
            for line in BEFORE_KILL:
                await session.run_line(line)
            notices = Notices()
            notices.fold(await cluster_health(backend))
            await session.run_line("kill B")
            killed = trio.current_time()
            seen: dict[str, float] = {}
            said: list[str] = []
            members: dict[str, Any] = {}
            while trio.current_time() - killed < 10.0:
                await trio.sleep(0.1)
                if not members and trio.current_time() - killed >= 0.5:
                    (reply,) = await session.run_line("members from=C")
                    members = reply.to_json()
                    members["text"] = printed(render(reply, session.commands))
                for name in "CDE":
                    info = await backend.node_info(name, counts=False)
                    if name not in seen and info["peers"].get("B") is False:
                        seen[name] = trio.current_time() - killed
                said += notices.fold(await cluster_health(backend), await backend.drain_notes())
            replies = {}
            for line in AFTER:
                (reply,) = await session.run_line(line)
                replies[line.split()[0]] = reply.to_json()
                if line.startswith("put"):
                    await hints_stored(backend, replies["put"].get("hinted", []))
            return seen, said, replies, members

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def hints_stored(backend: Backend, hinted: list[str]) -> None:
    """Wait, at most the write's timeout, until each fallback a put named ("A for B") holds its
    hint. The put is answered on its first W acks: a fallback's copy may still be on its way (the
    put went to D, C and A, A standing in for B; D answered on D's and C's acks), and `hints` at
    that instant finds nothing. Which ack lands first depends on latencies drawn from the one
    seeded network model in the order trio runs the node tasks, and trio shuffles that order, so
    the race went either way from run to run."""
    deadline = trio.current_time() + NodeConfig().request_timeout
    wanted = [tuple(h.split(" for ")) for h in hinted]
    while trio.current_time() < deadline:
        held = {(r["holder"], r["target"]) for f, _ in wanted for r in await backend.node_hints(f)}
        if all(pair in held for pair in wanted):
            return
        await trio.sleep(0.001)


def printed(view: RenderableType) -> str:
    """A view as the REPL prints it (120 columns, no colour)."""
    console = Console(width=120, color_system=None, record=True, file=io.StringIO())
    console.print(view)
    return console.export_text()


def test_a_crash_after_a_healed_partition_is_noticed_within_the_detection_bound(scenario: Outcome) -> None:
    seen, said, replies, _ = scenario
    bound = NodeConfig().detection_bound()
    assert set(seen) == {"C", "D", "E"}, f"only {sorted(seen)} saw B down within 10 s of the kill"
    assert max(seen.values()) <= bound, seen
    assert "down: B (noticed by A, C, D, E)" in said, said
    status = {n["id"]: n for n in replies["status"]["nodes"]}
    assert all("B" in status[n]["sees_down"] for n in "ACDE"), status
    put = replies["put"]
    assert put["ok"] and any(h.endswith("for B") for h in put.get("hinted", [])), put
    assert replies["hints"]["pending"] >= 1, replies["hints"]
    get = replies["get"]
    assert get["ok"] or get["code"] == "unavailable", get  # answered, or refused at once: no timeout


def test_members_says_why_the_views_differ_about_a_node_just_killed(scenario: Outcome) -> None:
    *_, members = scenario
    assert "B" in members["disagree"], members
    why = members["why"]["B"]
    assert why.startswith("its process does not run;") and "not noticed yet" in why, why
    assert "gossip has not spread" not in members["text"], members["text"]
    assert "B: its process does not run" in members["text"], members["text"]


def test_the_users_script_in_batch_mode_prints_the_down_notice() -> None:
    """The issue's `bhandar repl -e ...` itself (after a first second of gossip, see the module
    docstring): a script prints what the cluster noticed while a command ran, as the interactive
    REPL does; in -o json mode every command still prints exactly one object."""
    import json

    import typer
    from typer.testing import CliRunner

    from bhandar_cli.cli.repl_cmd import repl

    app = typer.Typer()
    app.command("repl")(repl)
    app.command("other")(lambda: None)  # two commands: typer then keeps the command name
    script = "; ".join(["sleep 1s", *BEFORE_KILL[1:], "kill B", "sleep 10s", *AFTER])
    table = CliRunner().invoke(app, ["repl", "--virtual-time", "-e", script])
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    down = next(i for i, line in enumerate(lines) if line.startswith("· down: B (noticed by"))
    assert lines[down - 1] == "slept 10s", lines[down - 2 : down + 1]
    assert "A stands in for B" in table.output  # the put left a hint
    as_json = CliRunner().invoke(app, ["repl", "--virtual-time", "-o", "json", "-e", script])
    assert as_json.exit_code == 0, as_json.output
    objects = [json.loads(line) for line in as_json.output.splitlines()]
    assert len(objects) == len(script.split("; ")) and all("cmd" in o for o in objects)
