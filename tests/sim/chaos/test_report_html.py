"""`chaos --report FILE`: the run as a self-contained HTML timeline. Recording the timeline changes
nothing in the run; the page says what failed and how to replay it, and draws every fault and
every operation."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path

import pytest

from bhandar_cli.sim.chaos.chaos_options import ChaosOptions
from bhandar_cli.sim.chaos.chaos_run import run_chaos
from bhandar_cli.sim.chaos.report import render_summary, reproduce_command
from bhandar_cli.sim.chaos.report_html import render_html
from tests.support.chaos_cli import invoke

PLANTED = ChaosOptions(13, 1500, faults=("clog", "loss"), consistency="QUORUM", bugs=("ack_before_quorum",))
EVERY_FAULT = ChaosOptions(5, 1200, faults=("kill", "restart", "partition", "clog", "delay", "loss", "join"))


def test_recording_the_timeline_changes_nothing_in_the_run() -> None:
    plain = run_chaos(EVERY_FAULT)
    kept = run_chaos(EVERY_FAULT, keep_history=True)
    assert render_summary(plain) == render_summary(kept)
    assert plain.spans == kept.spans and plain.history == ()
    # One band per fault injected, each within the run.
    assert len(kept.spans) == sum(kept.faults.values()) > 0
    assert {s[0] for s in kept.spans} == set(kept.faults)
    assert all(0 <= start <= end <= kept.sim_seconds for _, _, start, end in kept.spans)
    assert len(kept.history) == kept.check.ops


def test_a_passing_run_draws_every_fault_and_operation() -> None:
    report = run_chaos(EVERY_FAULT, keep_history=True)
    assert report.ok
    page = render_html(report)
    assert "✔ PASSED" in page and "replay this run" not in page
    assert page.count('class="fault"') == len(report.spans)
    assert page.count('class="op"') == len(report.history)
    assert 'class="violation"' not in page
    assert "<script" not in page and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_a_failing_run_puts_the_replay_command_and_its_violations_first(tmp_path: Path) -> None:
    target = tmp_path / "run.html"
    result = invoke("--seed", "13", "--ops", "1500", "--faults", "loss,clog", "--consistency", "quorum",
                    "--bug", "ack_before_quorum", "--report", str(target))  # fmt: skip
    assert result.exit_code == 1
    page = target.read_text(encoding="utf-8")
    command = reproduce_command(replace(PLANTED))
    assert f"reproduce with: {command}" in result.stderr.splitlines()
    assert page.index(command) < page.index("<h2>Timeline")  # at the top
    assert "✖ FAILED" in page
    listed = re.findall(r"<li>(stale_read_strict: [^<]*)</li>", page)
    assert listed and all("violation: " + html.unescape(v) in result.stderr for v in listed)
    named = {int(n) for v in listed for n in re.findall(r"#(\d+)", v)}
    assert page.count('class="violation"') == len(named) > 0  # each read a violation names is marked


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--swarm", "2"], "--report applies to a single run"),
        (["--scenario", "ministore"], "--report applies to a single run"),
    ],
)
def test_report_with_swarm_or_scenario_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = invoke(*args, "--report", str(tmp_path / "x.html"))
    assert result.exit_code == 2 and message in result.stderr


def test_report_into_a_missing_directory_fails_before_running(tmp_path: Path) -> None:
    result = invoke("--seed", "1", "--ops", "50", "--report", str(tmp_path / "nowhere" / "run.html"))
    assert result.exit_code == 2 and "no such directory" in result.stderr
