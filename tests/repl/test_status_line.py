"""The REPL's notices and status bar: one line per change, never one per observer; 80 columns."""

from __future__ import annotations

import random
from pathlib import Path

from bhandar_cli.repl.status_line import Notices, status_parts

NODES = ["A", "B", "C", "D", "E"]


def _seen(observer: str, peer: str, up: bool) -> tuple[str, dict[str, object], str]:
    return (f"{peer} is {'up' if up else 'down'}", {"peer": peer, "up": up}, observer)


def test_a_partition_is_announced_once_per_node_however_the_observations_trickle_in() -> None:
    # partition A | B C (D, E the third group): every node sees the other groups' nodes down.
    groups = [{"A"}, {"B", "C"}, {"D", "E"}]
    group_of = {n: g for g in groups for n in g}
    observations = [_seen(o, p, False) for o in NODES for p in NODES if p not in group_of[o]]
    random.Random(3).shuffle(observations)
    notices = Notices()
    lines = []
    for i in range(0, len(observations), 3):  # refreshes see a few observations at a time
        lines += notices.fold(observations[i : i + 3], NODES)
    announced = [part.split(" ")[0] for line in lines for part in line.removeprefix("down: ").split("), ")]
    assert sorted(announced) == NODES, lines  # each node announced down exactly once
    assert all(line.startswith("down: ") for line in lines)
    # The heal: everyone sees everyone up again, announced once per node, in as many lines as
    # refreshes that completed a node's recovery.
    healed = [
        _seen(o, p, True) for _, _, o in [(0, 0, o) for o in NODES] for p in NODES if p not in group_of[o]
    ]
    after = notices.fold(healed, NODES)
    assert after == ["up again: A, B, C, D, E"]
    assert notices.fold(healed, NODES) == []  # repeated observations are no news


def test_a_killed_node_and_its_return() -> None:
    notices = Notices()
    assert notices.fold([_seen("A", "D", False), _seen("B", "D", False)], NODES) == ["down: D (seen by A, B)"]
    assert notices.fold([_seen("C", "D", False), _seen("E", "D", False)], NODES) == []
    assert notices.fold([_seen(o, "D", True) for o in "ABC"], NODES) == []  # E still sees it down
    assert notices.fold([_seen("E", "D", True)], NODES) == ["up again: D"]
    # An observer that is killed takes its suspicions with it, silently.
    assert notices.fold([_seen("A", "B", False)], NODES) == ["down: B (seen by A)"]
    assert notices.fold([], ["B", "C", "D", "E"]) == []
    assert notices.fold([_seen("C", "B", False)], ["B", "C", "D", "E"]) == ["down: B (seen by C)"]
    other = ("F joined the ring", {"node": "F"}, "A")
    assert notices.fold([other, other], NODES) == ["F joined the ring"]


def _text(parts: list[tuple[str, str]]) -> str:
    return " · ".join(text for _, text in parts)


def test_the_status_bar_fits_80_columns_and_keeps_what_matters() -> None:
    state = {
        "nodes": 5,
        "down": ["D"],
        "partitions": [["A"], ["B", "C"], ["D", "E"]],
        "consistency": "QUORUM",
        "hints": 12,
        "trace": True,
    }
    line = _text(status_parts(state, 79))
    assert line == "4/5 up · down D · partition {A}|{B,C}|{D,E} · QUORUM · hints 12 · trace on"
    assert ("down", "down D") in status_parts(state, 79)
    names = [chr(ord("A") + i) for i in range(26)]
    crowded = {**state, "nodes": 26, "down": names[:20], "partitions": [names[:9], names[9:18], names[18:]]}
    for width in (79, 60):
        line = _text(status_parts(crowded, width))
        assert len(line) <= width, line
        assert line.startswith("6/26 up · ") and "hints 12" in line and "QUORUM" in line
    assert "3 groups" in _text(status_parts(crowded, 60))
    assert "+" in _text(status_parts(crowded, 79))  # the down list is shortened, not cut
    assert _text(status_parts(crowded, 20)).startswith("6/26 up · 20 down")  # too narrow: the least


def test_node_timestamps_read_as_times_of_day_or_virtual_seconds() -> None:
    from datetime import datetime

    from bhandar_cli.repl.views_data import show_time

    now = datetime(2026, 12, 3, 20, 31, 5, 123000).timestamp()
    assert show_time(now) == "20:31:05.123"
    assert show_time(12.5) == "12.500 s of virtual time"


def test_in_process_clusters_run_on_unix_time_unless_virtual() -> None:
    import time

    import trio

    from bhandar_cli.client.openers import cluster_clock

    async def now() -> float:
        return trio.current_time()

    assert abs(trio.run(now, clock=cluster_clock(False)) - time.time()) < 60
    assert trio.run(now, clock=cluster_clock(True)) == 0.0


def test_a_fallback_actor_is_explained_where_it_is_shown() -> None:
    import typer
    from typer.testing import CliRunner

    from bhandar_cli.cli.repl_cmd import repl

    app = typer.Typer()
    app.command("repl")(repl)
    app.command("other")(lambda: None)  # two commands: typer then keeps the command name

    # kv/k's home replicas are C, E and A (the REPL's default ring): with all three down, B
    # coordinates as a fallback and stamps the write with an actor of its own, B~1.
    script = "kill C; kill E; kill A; sleep 5s; put kv k 1 c=ONE via=B; get kv k c=ONE via=B"
    result = CliRunner().invoke(app, ["repl", "--virtual-time", "-e", script])
    assert result.exit_code == 0, result.output
    assert "B~1:1" in result.output
    assert "B~1: node B writing as a fallback" in result.output


def test_a_restored_nodes_actor_is_explained_as_a_restore_not_a_fallback(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from bhandar_cli.cli.repl_cmd import repl

    app = typer.Typer()
    app.command("repl")(repl)
    app.command("other")(lambda: None)

    # After a restore every node writes as a new actor, A~r1 and so on.
    script = "put kv k 1; snapshot s1; restore s1; put kv after 2; get kv after"
    result = CliRunner().invoke(app, ["repl", "--virtual-time", "--data-dir", str(tmp_path), "-e", script])
    assert result.exit_code == 0, result.output
    explained = [line for line in result.output.splitlines() if "~r1: node" in line]
    assert explained and all("after a restore from a snapshot" in line for line in explained), result.output
    assert "writing as a fallback" not in result.output
