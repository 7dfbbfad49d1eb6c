"""The one vocabulary of node state (bhandar_cli/client/cluster_health.py): what each node is, the cluster
in one line, and the REPL's notices, one per change once the failure detectors have caught up;
and every face saying the same (`status`, the REPL's bar, the web page's header and cards)."""

from __future__ import annotations

import json
import random
from typing import Any

import trio
import trio.testing

from bhandar_cli.client.cluster_health import NodeFacts, Notices, cluster_health, summarise
from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.status_line import status_parts
from bhandar_cli.web.state import WebState

NODES = list("ABCDE")


def node(name: str, up: bool = True, sees_down: str = "", status: str = "normal") -> NodeFacts:
    return {"id": name, "up": up, "status": status, "sees_down": list(sees_down)}


def test_facts_first_then_what_the_detectors_believe() -> None:
    # C was just killed: down at once, though nobody has noticed yet.
    health = summarise([node(n, up=n != "C") for n in NODES])
    assert [n.state for n in health.nodes] == ["up", "up", "down", "up", "up"]
    assert health.line() == "4/5 running · down C"
    # A partition: every node runs, cut off from the other groups; not down, not suspected.
    groups = [["A"], ["B", "C"], ["D", "E"]]
    cut = {"A": "BCDE", "B": "ADE", "C": "ADE", "D": "ABC", "E": "ABC"}
    health = summarise([node(n, sees_down=cut[n]) for n in NODES], groups)
    assert {n.state for n in health.nodes} == {"partitioned"}
    assert health.node("A") is not None and health.node("A").seen_down_by == ("B", "C", "D", "E")  # type: ignore[union-attr]
    assert health.line() == "5/5 running · partitioned {A} | {B, C} | {D, E}"
    # Believed down by a peer on its own side: suspected, and by whom.
    health = summarise([node("A", sees_down="B"), *(node(n) for n in "BCDE")])
    assert health.named("suspected") == ["B"] and health.line() == "5/5 running · B suspected by A"
    # Only running peers count: a dead node's last opinions are not news.
    health = summarise([node("A", up=False, sees_down="B"), *(node(n) for n in "BCDE")])
    assert health.named("suspected") == [] and health.line() == "4/5 running · down A"
    # Membership: joining, leaving, and a node that left is no longer counted.
    health = summarise(
        [node("A"), node("B", status="joining"), node("C", status="leaving"), node("F", status="left")]
    )
    assert [n.state for n in health.nodes] == ["up", "joining", "leaving", "left"]
    assert health.line() == "3/3 running · joining B · leaving C · left F"


def observed(
    alive: list[str], believed_down: dict[str, set[str]], groups: list[list[str]] | None = None
) -> Any:
    """The summary when each running node in `believed_down[peer]` believes `peer` down."""
    sees: dict[str, str] = {n: "" for n in NODES}
    for peer, by in believed_down.items():
        for observer in by:
            sees[observer] += peer
    return summarise([node(n, up=n in alive, sees_down=sees[n]) for n in NODES], groups or [])


def test_a_kill_is_announced_once_when_every_running_node_has_noticed_however_it_trickles_in() -> None:
    alive = ["A", "B", "D", "E"]
    for seed in range(5):
        notices = Notices()
        assert notices.fold(observed(NODES, {})) == []  # the first summary only sets what is known
        order = ["A", "B", "D", "E"]
        random.Random(seed).shuffle(order)
        lines = []
        for i in range(1, 5):
            lines += notices.fold(observed(alive, {"C": set(order[:i])}))
        assert lines == ["down: C (noticed by A, B, D, E)"], (seed, lines)
        # Revived: announced when nobody believes it down any more.
        assert notices.fold(observed(NODES, {"C": {"A"}})) == []  # the detectors catching up
        assert notices.fold(observed(NODES, {})) == ["up again: C"]
        assert notices.fold(observed(NODES, {})) == []  # no news is no line


def test_a_partition_and_its_heal_are_one_line_each() -> None:
    groups = [["A"], ["B", "C"], ["D", "E"]]
    group_of = {n: i for i, g in enumerate(groups) for n in g}
    pairs = [(o, p) for o in NODES for p in NODES if group_of[o] != group_of[p]]
    random.Random(7).shuffle(pairs)
    notices = Notices()
    notices.fold(observed(NODES, {}))
    lines = []
    for i in range(1, len(pairs) + 1, 3):  # refreshes see a few new beliefs at a time
        believed: dict[str, set[str]] = {}
        for observer, peer in pairs[:i]:
            believed.setdefault(peer, set()).add(observer)
        lines += notices.fold(observed(NODES, believed, groups))
    believed = {p: {o for o, q in pairs if q == p} for p in NODES}
    lines += notices.fold(observed(NODES, believed, groups))
    assert lines == ["partition noticed: each group sees the others down, {A} | {B, C} | {D, E}"]
    # Healed: the detectors catch up over a few refreshes; one line when they all have.
    half = {p: set(list(by)[:1]) for p, by in believed.items()}
    assert notices.fold(observed(NODES, half)) == []
    assert notices.fold(observed(NODES, {})) == ["heal noticed: every node sees every other up again"]


def test_a_node_that_left_is_never_announced_down() -> None:
    notices = Notices()
    six = [*NODES, "F"]
    notices.fold(summarise([node(n) for n in six]))
    # F left the ring and stopped: its peers' detectors come to believe it down.
    gone = summarise([*(node(n, sees_down="F") for n in NODES), node("F", up=False, status="left")])
    assert notices.fold(gone, [("F left: 3 records streamed out", {"node": "F"}, "F")]) == [
        "F left: 3 records streamed out"
    ]
    # Then it is retired: gone from the cluster, no news either.
    assert notices.fold(summarise([node(n) for n in NODES])) == []


def run_session(
    lines: list[str], nodes: int = 5
) -> list[tuple[str, list[str], dict[str, Any], dict[str, Any]]]:
    """Each line run in an in-process session on a virtual clock, then 6 s of refreshes as the
    REPL makes them: (line, the notices printed, the `status` reply, the web snapshot)."""

    async def main() -> list[tuple[str, list[str], dict[str, Any], dict[str, Any]]]:
        async with open_session(ClusterOptions(nodes=nodes, memory=True), "json") as session:
            backend = session.client.backend
            state = WebState(session)
            notices = Notices()
            notices.fold(await cluster_health(backend))
            out = []
            for line in lines:
                await session.run_line(line)
                said: list[str] = []
                for _ in range(20):
                    await trio.sleep(0.3)
                    said += notices.fold(await cluster_health(backend), await backend.drain_notes())
                (status,) = await session.run_line("status")
                snap = json.loads(json.dumps(await state.snapshot()))
                out.append((line, said, status.to_json(), snap))
            return out

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_every_face_says_the_same_and_a_decommissioned_node_is_not_down() -> None:
    steps = run_session(["kill C", "revive C", "partition A | B C", "heal", "add F", "decommission F"])
    said = {line: notices for line, notices, _, _ in steps}
    assert said["kill C"] == ["down: C (noticed by A, B, D, E)"]
    assert said["revive C"] == ["up again: C"]
    assert said["partition A | B C"] == [
        "partition noticed: each group sees the others down, {A} | {B, C} | {D, E}"
    ]
    assert said["heal"] == ["heal noticed: every node sees every other up again"]
    assert any(n.startswith("F joined") for n in said["add F"])
    assert not any("down" in n for n in said["decommission F"]), said["decommission F"]  # item 10
    assert any(n.startswith("F left") for n in said["decommission F"])
    for line, _, status, snap in steps:
        summary = status["summary"]
        # The web page's header and cards, the REPL's bar and `status` all say the same.
        assert snap["health"]["line"] == summary["line"], line
        assert [c["state"] for c in snap["nodes"]] == [n["state"] for n in status["nodes"]], line
        health = summarise(status["nodes"], status["partitions"])
        bar = " · ".join(text for _, text in status_parts(health, "QUORUM", 0, False, 200)[:-2])
        assert bar == summary["line"], line
        # And the counts are the cluster's own: nodes that have not left, and those running.
        members = [n for n in status["nodes"] if n["status"] != "left"]
        assert (summary["nodes"], summary["running"]) == (len(members), sum(n["up"] for n in members)), line
    _, _, killed, _ = steps[0]
    assert killed["summary"]["line"] == "4/5 running · down C"
    _, _, parted, _ = steps[2]
    assert parted["summary"]["line"] == "5/5 running · partitioned {A} | {B, C} | {D, E}"
