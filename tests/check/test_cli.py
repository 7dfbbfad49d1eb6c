"""`bhandar check` and `bhandar bench check` as commands: usage errors, exit codes, JSON, the
HTML report, the checklist's table, and the bench's two runs side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from bhandar_cli.check.catalog import scenarios
from bhandar_cli.cli.bench_check_cmd import bench_check
from bhandar_cli.cli.check_cmd import check
from tests.check.support import NODES, py

QUICK = ["--time-limit", "0.6s", "--recovery", "0.3s", "--timeout", "0.5s", "--rate", "40", "--seed", "2"]


def invoke(*args: str) -> Result:
    app = typer.Typer(add_completion=False)

    @app.callback()
    def root() -> None:
        """Test harness."""

    app.command("check")(check)
    app.command("bench-check")(bench_check)
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-w", "no-such"], "unknown workload 'no-such' (use echo, unique-ids, broadcast"),
        (["-w", "echo", "--nemesis", "partition,meteor"], "--nemesis: unknown fault 'meteor'"),
        (["-w", "echo", "--time-limit", "soon"], "--time-limit takes a duration"),
        (["-w", "echo", "--checklist", "--nemesis", "kill"], "bring their own faults"),
        (["-w", "echo", "--checklist", "--jobs", "0"], "--jobs must be an integer from 1 to 256, got '0'"),
        (["-w", "echo", "--scenario", "fire"], "--scenario: unknown scenario 'fire'"),
        (
            ["-w", "broadcast", "--scenario", "hint holder killed"],
            "--scenario: unknown scenario 'hint holder killed' for broadcast (use no fault; one node down",
        ),
        (["-w", "echo", "--availability", "most"], "--availability takes total or a fraction from 0 to 1"),
        (["-w", "echo", "--availability", "1.5"], "--availability takes total or a fraction from 0 to 1"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args: list[str], words: str) -> None:
    result = invoke("check", "--bin", "true", *args)
    assert result.exit_code == 2
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def strict_json(text: str) -> dict[str, Any]:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return dict(json.loads(text, parse_constant=refuse))


def test_a_valid_run_in_json_and_its_logs(tmp_path: Path) -> None:
    argv = " ".join(py("sets.py"))
    result = invoke("check", "--bin", argv, "-w", "g-set", "--log-dir", str(tmp_path), "-o", "json", *QUICK)
    assert result.exit_code == 0, result.output
    out = strict_json(result.stdout)
    assert (out["cmd"], out["ok"], out["verdict"], out["seed"], out["exit"]) == ("check", True, "valid", 2, 0)
    assert out["operations"]["ok"] > 5 and out["repeat"].startswith("bhandar check --bin ")
    assert "--seed 2" in out["repeat"] and out["staleness"] and out["stats"]["lost"] == 0
    assert {p.name for p in tmp_path.iterdir()} >= {"n0.log", "n1.log", "n2.log", "history.jsonl", "data"}
    rows = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert len(rows) >= out["operations"]["ops"] + 3 and {r["f"] for r in rows} == {"add", "read"}


def test_an_invalid_run_exits_1_and_its_report_marks_the_operations(tmp_path: Path) -> None:
    report = tmp_path / "run.html"
    argv = py("dynamo_kv.py", MODE="ignore")
    result = invoke(
        "check",
        "--bin",
        " ".join(argv),
        "-w",
        "dynamo-kv",
        "--log-dir",
        str(tmp_path / "logs"),
        "--report",
        str(report),
        *QUICK,
    )
    assert result.exit_code == 1, result.output
    assert "INVALID: " in result.stdout and "should have replaced it" in result.stdout
    html = report.read_text()
    assert "<svg" in html and 'class="violation"' in html and 'class="lamport"' in html
    assert "repeat this run with: <code>bhandar check" in html


def test_a_setup_error_exits_2_and_says_why(tmp_path: Path) -> None:
    result = invoke("check", "--bin", "/nonexistent/node", "-w", "echo", "--log-dir", str(tmp_path), *QUICK)
    assert result.exit_code == 2
    assert "bhandar: check: setup error: cannot start '/nonexistent/node'" in result.stderr


def test_the_checklist_table(tmp_path: Path) -> None:
    """Its scenarios run three at a time (`--jobs 3`); the table keeps the catalog's order."""
    report = tmp_path / "checklist.html"
    result = invoke(
        "check",
        "--bin",
        f"node {NODES / 'broadcast.js'}",
        "-w",
        "g-set",
        "--checklist",
        "--jobs",
        "3",
        "--log-dir",
        str(tmp_path),
        "--report",
        str(report),
        "--time-limit",
        "0.4s",
        "--recovery",
        "0.2s",
        "--timeout",
        "0.4s",
        "--rate",
        "40",
        "--seed",
        "3",
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        lines[0].split(" | ")[0].strip() == "scenario" and "stale reads" in lines[0] and "p99 ms" in lines[0]
    )
    own = list(scenarios("g-set"))
    assert own[-2:] == ["node killed during a partition", "restarts"] and "slow node" in own
    rows = lines[2 : 2 + len(own)]
    assert [line.split(" | ")[0].strip() for line in rows] == own
    assert all(line.rstrip().endswith("valid") for line in rows)
    assert "staleness" in report.read_text()
    assert "staleness (reads fresh, by how long" in result.stdout


def test_bench_check_measures_both_ways(tmp_path: Path) -> None:
    result = invoke(
        "bench-check", "--nodes", "3", "--tokens", "6", "--seconds", "0.3", "--ops", "400", "-o", "json"
    )
    assert result.exit_code == 0, result.output
    out = strict_json(result.stdout)
    for run in ("harness_light", "pipe_light", "harness_heavy", "pipe_heavy"):
        assert out[run]["hops"] > 20 and out[run]["median_hop_ms"] > 0
    assert out["checker"]["valid"]["verdict"] == "valid"
    assert out["checker"]["stale_read"]["verdict"] == "invalid"


def test_bench_check_says_in_one_line_when_a_hop_node_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node that dies before it is ready: one line naming the node and what it said, exit 1 (it
    was a traceback)."""
    import sys

    import bhandar_cli.check.bench as bench

    dies = "import sys; sys.stderr.write('no ring for me\\n'); sys.exit(3)"
    monkeypatch.setattr(bench, "HOP_NODE", [sys.executable, "-c", dies])
    result = invoke("bench-check", "--nodes", "2", "--tokens", "2", "--seconds", "0.2", "--ops", "10")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bhandar: the hop ring failed, nothing was measured: ")
    assert "n1 exited (status 3) before answering init" in lines[0] and "no ring for me" in lines[0]
