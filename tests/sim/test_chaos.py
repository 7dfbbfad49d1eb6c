"""`bhandar chaos`: fixed seeds under faults find no violation, a planted bug is caught, runs replay.

The summary's last line ("real time ...") is the only one that depends on the machine; the
determinism tests drop it (and the real-time fields of the JSON object) before comparing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from bhandar_cli.cmd.chaos import chaos
from bhandar_cli.sim.chaos import (
    REAL_TIME_FIELDS,
    ChaosOptions,
    draw_params,
    render_summary,
    report_json,
    reproduce_command,
    run_chaos,
)
from bhandar_cli.sim.faults import FAULT_KINDS
from bhandar_cli.sim.ministore_scenario import run_ministore_scenario

ALL_FAULTS_SEEDS = (1, 2, 3, 5, 8, 13, 21, 34, 128, 155, 189, 2138)  # 128-2138 once found bugs
SWARM_SEEDS = (4, 6, 7, 9, 10, 11, 12, 42, 99, 211, 218, 3287)
PLANTED = ChaosOptions(19, 1500, faults=("clog", "loss"), consistency="QUORUM", bugs=("ack_before_quorum",))


def make_app() -> typer.Typer:
    app = typer.Typer(add_completion=False)

    @app.callback()
    def root() -> None:
        """Test harness."""

    app.command("chaos")(chaos)
    return app


runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(make_app(), ["chaos", *args])


@pytest.mark.parametrize("seed", ALL_FAULTS_SEEDS)
def test_seeds_with_every_fault_find_no_violation(seed: int) -> None:
    report = run_chaos(ChaosOptions(seed, 3000, faults=FAULT_KINDS))
    assert report.check.violations == ()
    assert report.check.ops == 3000
    assert report.faults  # faults really happened


@pytest.mark.parametrize("seed", SWARM_SEEDS)
def test_swarm_seeds_find_no_violation(seed: int) -> None:
    report = run_chaos(ChaosOptions(seed, 3000))
    assert report.check.violations == ()
    assert report.params.faults.kinds


def test_the_planted_bug_is_caught_with_its_seed() -> None:
    bad = run_chaos(PLANTED)
    assert not bad.ok
    assert {v.kind for v in bad.check.violations} == {"stale_read_strict"}
    clean = run_chaos(ChaosOptions(19, 1500, faults=("clog", "loss"), consistency="QUORUM"))
    assert clean.ok


def test_the_planted_bug_exits_1_with_the_line_that_reproduces_it() -> None:
    result = invoke(
        "--seed",
        "19",
        "--ops",
        "1500",
        "--faults",
        "loss,clog",
        "--consistency",
        "quorum",
        "--bug",
        "ack_before_quorum",
    )
    assert result.exit_code == 1
    line = (
        "reproduce with: bhandar chaos --seed 19 --ops 1500 --faults clog,loss --consistency QUORUM "
        "--bug ack_before_quorum"
    )
    assert line in result.stderr.splitlines()
    assert "violation: stale_read_strict" in result.stderr
    assert "FAILED" in result.stdout


def test_reproduce_command_names_every_fixed_option() -> None:
    options = ChaosOptions(5, 100, nodes=4, replicas=2, faults=(), consistency="ONE", keys=7, clients=3)
    assert reproduce_command(options) == (
        "bhandar chaos --seed 5 --ops 100 --nodes 4 --replicas 2 --faults none --consistency ONE --keys 7 "
        "--clients 3"
    )


def test_the_same_seed_prints_the_same_summary() -> None:
    options = ChaosOptions(11, 1500, faults=FAULT_KINDS)
    first, second = run_chaos(options), run_chaos(options)
    assert render_summary(first) == render_summary(second)
    strip = {k: v for k, v in report_json(first).items() if k not in REAL_TIME_FIELDS}
    assert strip == {k: v for k, v in report_json(second).items() if k not in REAL_TIME_FIELDS}
    assert render_summary(run_chaos(ChaosOptions(12, 1500, faults=FAULT_KINDS))) != render_summary(first)


def test_the_same_seed_prints_the_same_bytes_in_another_process() -> None:
    """String hashing is salted per process; nothing may depend on it."""
    script = (
        "import typer, sys\n"
        "from bhandar_cli.cmd.chaos import chaos\n"
        "app = typer.Typer()\n"
        "app.command()(chaos)\n"
        "app(['--seed', '3', '--ops', '1500', '--faults', 'all'])\n"
    )
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[-1].startswith("real time")
        outputs.append("\n".join(lines[:-1]))
    assert outputs[0] == outputs[1]


def test_options_fix_what_the_seed_would_draw() -> None:
    drawn = draw_params(ChaosOptions(7, 10))
    fixed = draw_params(ChaosOptions(7, 10, nodes=4, replicas=3, consistency="ALL", faults=("kill",)))
    assert (fixed.nodes, fixed.replicas, fixed.levels, fixed.faults.kinds) == (4, 3, ("ALL",), ("kill",))
    # Fixing some options leaves every other parameter as the seed drew it.
    assert (fixed.request_timeout, fixed.clients, fixed.keys) == (
        drawn.request_timeout,
        drawn.clients,
        drawn.keys,
    )
    assert draw_params(ChaosOptions(7, 10, nodes=2, replicas=3)).replicas == 2


def test_json_output_has_the_stable_fields() -> None:
    result = invoke("--seed", "4", "--ops", "300", "-o", "json")
    assert result.exit_code == 0, result.stderr
    obj = json.loads(result.stdout)
    for name in (
        "seed",
        "ops",
        "acked_writes",
        "lost_writes",
        "availability",
        "stale_reads",
        "hints_stored",
        "hints_delivered",
        "sim_seconds",
        "real_seconds",
        "ok",
    ):
        assert name in obj
    assert (obj["seed"], obj["ops"], obj["ok"], obj["lost_writes"]) == (4, 300, True, 0)
    assert 0.0 <= obj["availability"] <= 1.0


def test_table_output_puts_real_time_on_its_own_last_line() -> None:
    result = invoke("--seed", "4", "--ops", "300")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("chaos seed 4: 300 operations")
    assert lines[-2] == "result           OK: no violations"
    assert lines[-1].startswith("real time ")
    assert not any("real" in line for line in lines[:-1])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ops", "0"], "--ops must be an integer from 1 to 10000000, got '0'"),
        (["--seed", "-3"], "--seed must be an integer"),
        (["--faults", "kill,fire"], "unknown fault 'fire' in --faults"),
        (["--consistency", "MOST"], "--consistency must be ONE, QUORUM or ALL, got 'MOST'"),
        (["--nodes", "3", "--replicas", "5"], "--replicas 5 needs at least 5 nodes"),
        (["--bug", "nope"], "unknown --bug 'nope'"),
        (["--scenario", "ministore", "--nodes", "3"], "--nodes does not apply to --scenario ministore"),
        (["--scenario", "bakery"], "unknown --scenario 'bakery'"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert message in result.stderr
    assert result.stdout == ""


def test_ministore_scenario_has_the_seeds_shape() -> None:
    result = run_ministore_scenario()
    strict, no_handoff, hints = result.modes
    assert (strict.mode, no_handoff.mode, hints.mode) == ("strict", "sloppy, no handoff", "sloppy + hints")
    assert strict.availability < 0.97 < no_handoff.availability and hints.availability > 0.97
    assert strict.stale_reads == 0 and strict.hints_stored == 0 and strict.hints_delivered == 0
    assert no_handoff.hints_stored > 0 and no_handoff.hints_delivered == 0
    assert hints.hints_delivered > 0
    assert hints.stale_reads < no_handoff.stale_reads


def test_ministore_scenario_from_the_command_line() -> None:
    result = invoke("--scenario", "ministore", "--ops", "2500", "-o", "json")
    assert result.exit_code == 0, result.stderr
    obj = json.loads(result.stdout)
    assert obj["scenario"] == "ministore" and obj["seed"] == 54 and obj["requests"] == 2500
    assert [m["mode"] for m in obj["modes"]] == ["strict", "sloppy, no handoff", "sloppy + hints"]
    table = invoke("--scenario", "ministore", "--ops", "2500").stdout.splitlines()
    assert table[1].startswith("strict             availability ")
    assert table[3].startswith("sloppy + hints     availability ")
