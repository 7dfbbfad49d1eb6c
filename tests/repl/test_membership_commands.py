"""Membership, anti-entropy and storage commands through the REPL (virtual clock, real LSM stores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bhandar_cli.node.net.wire_versions import PROTOCOL_VERSION

Run = Any


def test_add_and_decommission_move_keys_and_keep_every_key_readable(repl: Run) -> None:
    puts = [f"put kv k{i} {i}" for i in range(40)]
    gets = [f"get kv k{i} c=ALL" for i in range(40)]
    out = repl([*puts, "add F zone=z2", "status", "members from=B", *gets, "decommission F", "status", *gets])
    assert all(o["ok"] for o in out), [o for o in out if not o["ok"]]
    add = out[40]
    assert add["node"] == "F" and add["zone"] == "z2" and add["keys_streamed"] > 0
    status = out[41]
    f = next(n for n in status["nodes"] if n["id"] == "F")
    assert (f["code"], f["tokens"]) == ("UN", 8) and f["owns"] > 0
    assert {m["id"]: m["status"] for m in out[42]["members"]}["F"] == "normal"
    assert [o["values"] for o in out[43:83]] == [[i] for i in range(40)]
    leave = out[83]
    assert leave["node"] == "F" and leave["keys_streamed"] > 0
    assert "F" not in [n["id"] for n in out[84]["nodes"]]
    assert [o["values"] for o in out[85:125]] == [[i] for i in range(40)]


def test_membership_commands_reject_bad_input(repl: Run) -> None:
    out = repl(
        [
            "add A",
            "add 9x",
            "decommission Q",
            "merkle A A",
            "members from=Z",
            "restore nosuch",
            "snapshot ../x",
        ]
    )
    assert [o["ok"] for o in out] == [False] * 7
    assert {o["code"] for o in out} == {"bad_input"}


@pytest.mark.parametrize("name", ["../x", "a..b", ".hidden", "x/y"])
def test_a_snapshot_name_that_is_not_a_plain_name_is_refused_before_any_directory_is_made(
    repl: Run, tmp_path: Path, name: str
) -> None:
    data = tmp_path / "data"
    out = repl([f"snapshot {name}", f"snapshot {name} to={tmp_path / 'copies'}"], data_dir=str(data))
    assert [(o["ok"], o["code"]) for o in out] == [(False, "bad_input")] * 2, out
    assert all("bad snapshot name" in o["error"] for o in out)
    assert not (data / "snapshots").exists() and not (tmp_path / "copies").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # nothing beside it either


def test_merkle_shows_differences_and_repair_exchanges_exactly_them(repl: Run) -> None:
    out = repl(
        [
            "partition C",
            "sleep 4s",
            *[f"put kv k{i} {i} c=ONE via=A" for i in range(12)],
            "heal",
            "sleep 1s",  # before hints are delivered: C still lacks the writes... unless handed off
            "merkle A C",
            "repair C",
            "merkle A C",
        ],
        nodes=3,
        repair_interval=0,  # the `repair` command's work: background anti-entropy would do it first
    )
    before, repair, after = out[-3], out[-2], out[-1]
    differing_keys = {k for r in before["ranges"] for k in r["keys"]}
    assert before["differing"] > 0 and differing_keys
    assert repair["keys"] >= len(differing_keys)
    assert after["differing"] == 0 and all(r["equal"] for r in after["ranges"])


def test_flush_compact_snapshot_restore(repl: Run, tmp_path: Path) -> None:
    out = repl(
        [
            "put kv a 1",
            "put kv b 2",
            "flush",
            "compact A",
            "snapshot s1",
            "put kv a 99",
            "restore s1",
            "get kv a c=ALL",
        ],
        data_dir=str(tmp_path),
    )
    assert all(o["ok"] for o in out), [o for o in out if not o["ok"]]
    assert len(out[2]["nodes"]) == 5 and out[3]["nodes"][0]["node"] == "A"
    assert out[4]["files"] > 0 and (tmp_path / "snapshots" / "s1").is_dir()
    assert out[6]["nodes"] == ["A", "B", "C", "D", "E"]
    assert out[7]["values"] == [1]
    again = repl(["put kv c 3", "get kv c"], data_dir=str(tmp_path))
    assert again[1]["values"] == [3]


def test_upgrade_restarts_one_node_at_a_time_and_loses_nothing(repl: Run) -> None:
    out = repl(
        [*[f"put kv k{i} {i}" for i in range(10)], "upgrade", *[f"get kv k{i} c=ALL" for i in range(10)]]
    )
    upgrade = out[10]
    assert [r["node"] for r in upgrade["nodes"]] == ["A", "B", "C", "D", "E"]
    assert all(r["settled"] for r in upgrade["nodes"])
    assert [o["values"] for o in out[11:]] == [[i] for i in range(10)]


def test_upgrade_refuses_a_step_that_would_leave_two_replicas_down(repl: Run) -> None:
    out = repl(["kill D", "upgrade", "upgrade to=2", "upgrade to=7"])
    refused = out[1]
    assert not refused["ok"] and refused["code"] == "refused"
    text = refused["error"]
    assert "D is down (seen by this client" in text and "two replicas of those keys down" in text, text
    # The in-process cluster has no wire protocol to move; and a version this build lacks is refused.
    assert out[2]["code"] == "bad_input" and "process cluster" in out[2]["error"]
    assert out[3]["code"] == "bad_input" and f"1..{PROTOCOL_VERSION}" in out[3]["error"]


def test_repair_age_per_range_is_kept_and_reported(repl: Run) -> None:
    before, _, after = repl(["metrics", "repair", "metrics"])
    ages_before = before["anti_entropy"]["repair_age"]
    assert all(r["never"] > 0 for r in ages_before.values())
    ages_after = after["anti_entropy"]["repair_age"]
    assert set(ages_after) == {"A", "B", "C", "D", "E"}
    assert all(r["never"] == 0 and r["oldest_s"] is not None for r in ages_after.values())


def test_wait_converged_waits_for_hints_and_replicas(repl: Run) -> None:
    out = repl(
        [
            "kill C",
            "sleep 4s",
            *[f"put kv k{i} {i}" for i in range(10)],
            "revive C",
            "wait converged",
            "hints",
        ]
    )
    waited = out[-2]
    assert waited["ok"] and waited["waited_s"] > 0
    assert out[-1]["queues"] == []


def test_wait_converged_times_out_with_the_reason(repl: Run) -> None:
    out = repl(["kill C", "sleep 4s", "put kv k v", "partition C", "revive C", "wait converged timeout=3s"])
    assert out[-1]["ok"] is False and out[-1]["code"] == "timeout"
    assert "hint" in out[-1]["error"] or "differ" in out[-1]["error"]


def test_an_interrupted_add_says_what_it_left_and_the_ring_agrees() -> None:
    import trio

    from bhandar_cli.client.openers import ClusterOptions, cluster_clock
    from bhandar_cli.repl.batch import open_session
    from bhandar_cli.repl.interactive import interrupted_text

    async def main() -> tuple[str, str, dict[str, Any]]:
        async with open_session(ClusterOptions(nodes=4, memory=True)) as session:
            (never,) = session.parse("add F")
            before = interrupted_text(session, never)  # Ctrl-C before the node was started
            (add,) = session.parse("add F zone=z2")
            with trio.move_on_after(0.5):  # Ctrl-C half a second in: the join is under way
                await session.execute(add)
            said = interrupted_text(session, add)
            for _ in range(60):  # what it said must come true: F finishes joining on its own
                status = (await session.run_line("status"))[0].to_json()
                f = next((n for n in status["nodes"] if n["id"] == "F"), None)
                if f is not None and f["code"] == "UN" and f["owns"] > 0:
                    break
                await trio.sleep(0.5)
            return before, said, status

    before, said, status = trio.run(main, clock=cluster_clock(True))
    assert before == "cancelled: F was not started"
    assert said.startswith("stopped waiting, but F was started and goes on joining")
    f = next(n for n in status["nodes"] if n["id"] == "F")
    assert f["code"] == "UN" and f["owns"] > 0


def test_a_data_dir_is_reopened_only_with_the_nodes_it_holds(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from bhandar_cli.cli.repl_cmd import repl as repl_command

    app = typer.Typer()
    app.command("repl")(repl_command)
    app.command("other")(lambda: None)  # two commands: typer keeps the command name

    def run(nodes: int, script: str) -> Any:
        args = ["repl", "--virtual-time", "--data-dir", str(tmp_path), "--nodes", str(nodes), "-o", "json"]
        return CliRunner().invoke(app, [*args, "-e", script])

    first = run(5, "put kv k 1; add F zone=z3")
    assert first.exit_code == 0, first.output
    fewer = run(3, "status")
    assert fewer.exit_code == 2 and fewer.stdout == ""
    assert (
        "holds the data of 6 nodes (A, B, C, D, E, F); --nodes 3 would leave D, E, F in the ring"
        in fewer.stderr
    )
    assert "start it with --nodes 6, or use another directory" in fewer.stderr
    # `bhandar web` shapes its cluster with the same options and refuses the same way.
    from bhandar_cli.cli.web_cmd import web as web_command

    web_app = typer.Typer()
    web_app.command("web")(web_command)
    web_app.command("other")(lambda: None)
    refused = CliRunner().invoke(web_app, ["web", "--data-dir", str(tmp_path), "--nodes", "3", "--port", "0"])
    assert refused.exit_code == 2 and "--nodes 3 would leave D, E, F in the ring" in refused.stderr
    # With every node it holds, no member is a ghost: every node that owns a range runs, and no
    # hint waits for a node nobody runs.
    import json

    again = run(6, "status; hints; decommission F")
    assert again.exit_code == 0, again.output
    status, hints, _ = (json.loads(line) for line in again.stdout.splitlines())
    assert sorted(n["id"] for n in status["nodes"]) == ["A", "B", "C", "D", "E", "F"]
    assert abs(sum(n["owns"] for n in status["nodes"]) - 1) < 1e-9 and hints["pending"] == 0
    # A node that left is not a member any more: the five original nodes start again.
    after = run(5, "status")
    assert after.exit_code == 0, after.output
    (status,) = (json.loads(line) for line in after.stdout.splitlines())
    assert sorted(n["id"] for n in status["nodes"]) == ["A", "B", "C", "D", "E"]
    assert abs(sum(n["owns"] for n in status["nodes"]) - 1) < 1e-9
