"""What the REPL and the command line say is what happened: a node killed twice is killed once, a
hint is not a replica, a join moves what it says it moves, repair counts say what they count, a
corruption names a time and a key as a person reads them, the ring is drawn whole, a partition
splits something, a negative increment is an argument, and the demo list names --web."""

from __future__ import annotations

import json
import re
from pathlib import Path

import trio
import trio.testing
from rich.console import Console
from typer.testing import CliRunner

from bhandar_cli.cli.app import app
from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.views import render

runner = CliRunner()


def printed(lines: list[str], nodes: int = 5) -> list[tuple[dict[str, object], str]]:
    """Each command's JSON reply and its view as the REPL prints it (120 columns, no colour)."""

    async def main() -> list[tuple[dict[str, object], str]]:
        async with open_session(ClusterOptions(nodes=nodes, memory=True), "json") as session:
            out = []
            for line in lines:
                for reply in await session.run_line(line):
                    console = Console(width=120, color_system=None, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
                    console.print(render(reply, session.commands))
                    out.append((reply.to_json(), console.export_text()))
            return out

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_node_killed_twice_is_killed_once() -> None:
    (kill, first), (again, second), (revive, _), (revive_again, third) = printed(
        ["kill B; kill B", "revive B; revive B"]
    )
    assert (kill["changed"], again["changed"]) == (True, False)
    assert (first.strip(), second.strip()) == ("killed B", "B was already down")
    assert (revive["changed"], revive_again["changed"]) == (True, False)
    assert third.strip() == "B was already up"


def test_a_hint_holder_is_not_called_a_replica() -> None:
    # kv/cart:7's replicas are D, E and A (prefs); with D down a fallback takes its write as a hint.
    replies = printed(["prefs kv cart:7"])
    replicas = replies[0][0]["replicas"]
    assert isinstance(replicas, list)
    down = replicas[0]
    steps = printed([f"kill {down}", "sleep 5s", "put kv cart:7 tea", "sleep 1s", "clock kv cart:7"])
    clock, text = steps[-1]
    assert "hint" in json.dumps(clock["holders"]), clock
    assert "every replica holds" not in text, text
    assert f"{down} down, not asked" in text and "as a hint" in text, text


def test_metrics_say_which_ranges_were_never_compared_and_out_of_how_many() -> None:
    ((metrics, text),) = printed(["metrics"], nodes=3)
    anti_entropy = metrics["anti_entropy"]
    assert isinstance(anti_entropy, dict)
    # 3 nodes x 8 tokens = 24 token ranges, of 2 keyspaces, each range on 3 replicas.
    assert anti_entropy["ranges"] == 48
    said = " ".join(text.split())
    assert "144 of 144 range replicas never compared (48 keyspace ranges, each on its replicas)" in said, text


def test_the_ring_is_drawn_whole_without_a_stray_letter_below_it() -> None:
    ((_, text),) = printed(["ring"])
    drawing = text.split("\n node")[0].splitlines()
    rows = [i for i, row in enumerate(drawing) if row.strip()]
    letters = [len(drawing[i].replace(" ", "")) for i in rows]
    # The circle's top and bottom rows hold a run of letters each; a stray point would be a row of one.
    assert min(letters[0], letters[-1]) > 3, "\n".join(drawing)
    assert abs(letters[0] - letters[-1]) <= 2, "\n".join(drawing)


def test_the_status_table_names_every_column_and_the_states_in_the_vocabulary() -> None:
    _, (_, text) = printed(["kill C", "status"])
    header = text.splitlines()[0].split()
    assert header[:2] == ["state", "node"], text
    assert [line.split()[0] for line in text.splitlines()[2:7]] == ["up", "up", "down", "up", "up"]
    assert text.rstrip().splitlines()[-1] == "4/5 running · down C"


def test_a_partition_of_one_group_is_refused() -> None:
    ((reply, text),) = printed(["partition A B C D E"])
    assert reply["ok"] is False and reply["code"] == "bad_input", reply
    assert "splits nothing" in text
    ((fine, _),) = printed(["partition A B"])  # the nodes not named are the second group
    assert fine["groups"] == [["A", "B"], ["C", "D", "E"]]


def test_a_negative_increment_is_an_argument_not_an_option(tmp_path: Path) -> None:
    missing = str(tmp_path / "none")
    done = runner.invoke(app, ["incr", "counters", "visits", "-2", "--cluster", missing])
    assert "no such option" not in done.output, done.output
    assert done.exit_code == 1 and "no cluster in" in done.output  # it got as far as the cluster
    bad = runner.invoke(app, ["incr", "counters", "visits", "-x", "--cluster", missing])
    assert bad.exit_code == 2 and "DELTA" in bad.output


def test_the_demo_list_mentions_the_web_page() -> None:
    done = runner.invoke(app, ["demo"])
    assert done.exit_code == 0
    assert re.search(r"--web also shows it on the live page", done.output), done.output


def test_the_join_demo_counts_the_copies_it_moved() -> None:
    from bhandar_cli.teach.demos_membership import KEYS, _naive_moves

    # Consistent hashing moves the copies the new node takes; hash mod N moves them all around.
    naive = _naive_moves(["A", "B", "C", "D"], "E")
    assert 0 < naive <= 3 * KEYS
    done = runner.invoke(app, ["demo", "join", "--auto", "--virtual-time"])
    assert done.exit_code == 0, done.output
    said = " ".join(done.output.split())
    held = re.search(r"E holds copies of (\d+) keys", said)
    moved = re.search(r"(\d+) of the 90 copies \((\d+)%\) moved to E", said)
    assert held and moved, said
    (keys,), (copies, pct) = map(int, held.groups()), map(int, moved.groups())
    assert keys == copies and pct == round(100 * copies / 90)
    assert f"would have moved {naive} of the 90 copies ({round(100 * naive / 90)}%)" in said
    assert "80%" not in said
