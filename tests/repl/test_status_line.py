"""The REPL's status bar: the cluster's summary in the words `status` and the web page use, and
what it shortens to fit 80 columns and less."""

from __future__ import annotations

from pathlib import Path

from bhandar_cli.client.cluster_health import ClusterHealth, summarise
from bhandar_cli.repl.status_line import status_parts

NODES = ["A", "B", "C", "D", "E"]


def _health(names: list[str], down: list[str], groups: list[list[str]]) -> ClusterHealth:
    return summarise(
        [{"id": n, "up": n not in down, "status": "normal", "sees_down": []} for n in names], groups
    )


def _text(parts: list[tuple[str, str]]) -> str:
    return " · ".join(text for _, text in parts)


def test_the_status_bar_fits_80_columns_and_keeps_what_matters() -> None:
    health = _health(NODES, ["D"], [["A"], ["B", "C"], ["D", "E"]])
    wide = _text(status_parts(health, "QUORUM", 12, True, 100))
    assert wide == "4/5 running · down D · partitioned {A} | {B, C} | {D, E} · QUORUM · hints 12 · trace on"
    line = _text(status_parts(health, "QUORUM", 12, True, 79))
    assert line == "4/5 running · down D · partition {A}|{B,C}|{D,E} · QUORUM · hints 12 · trace on"
    assert ("down", "down D") in status_parts(health, "QUORUM", 12, True, 79)
    names = [chr(ord("A") + i) for i in range(26)]
    crowded = _health(names, names[:20], [names[:9], names[9:18], names[18:]])
    for width in (79, 64):
        line = _text(status_parts(crowded, "QUORUM", 12, True, width))
        assert len(line) <= width, line
        assert line.startswith("6/26 running · ") and "hints 12" in line and "QUORUM" in line
    assert "3 groups" in _text(status_parts(crowded, "QUORUM", 12, True, 64))
    assert "+" in _text(status_parts(crowded, "QUORUM", 12, True, 79))  # the down list is shortened, not cut
    narrow = _text(status_parts(crowded, "QUORUM", 12, True, 20))
    assert narrow.startswith("6/26 running · 20 down")  # too narrow: the least


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
    # coordinates as a fallback and stamps the write with its exact actor, B~x.
    script = "kill C; kill E; kill A; sleep 5s; put kv k 1 c=ONE via=B; get kv k c=ONE via=B"
    result = CliRunner().invoke(app, ["repl", "--virtual-time", "-e", script])
    assert result.exit_code == 0, result.output
    assert "B~x:1" in result.output
    assert "B~x: the dots node B mints for a key it does not hold" in result.output


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
