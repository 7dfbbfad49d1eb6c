"""Nodes that misbehave never hang or crash the harness: garbage, a flood, no init, an exit, a
hang (that ignores SIGTERM and leaves a child behind), a program that does not exist. Each gets
a clear verdict or setup error naming the node, and no process of theirs outlives the check.
All run at once (one trio loop)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bhandar_cli.check.check_run import CheckOutcome, run_checks
from tests.check.support import alive, py, short

CASES = {
    "garbage": py("garbage.py"),
    "flood": py("flood.py"),
    "no-init": py("no_init.py"),
    "exits": py("exits.py"),
    "hang": py("hang.py"),
    "missing": ("/nonexistent/bhandar-test-node",),
}


FLOOD_LIMIT = {"flood": {"flood_limit": 2000}}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CheckOutcome]:
    root = tmp_path_factory.mktemp("misbehaving")
    # The flood is judged on a lower bound than the default 10,000 a second: the six programs
    # run at once, and a loaded machine (two test workers) reads fewer lines a second than that.
    runs = [
        short(argv, "echo", root / name, time_limit=0.5, init_timeout=1.5, **FLOOD_LIMIT.get(name, {}))
        for name, argv in CASES.items()
    ]
    return dict(zip(CASES, run_checks(runs), strict=True))


def test_garbage_is_a_protocol_error_quoting_the_line(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["garbage"]
    assert outcome.exit_code == 2 and outcome.verdict is None
    assert "protocol error: n" in outcome.error and "not JSON" in outcome.error
    assert "'hello, this is not JSON'" in outcome.error


def test_a_flood_is_stopped_and_named(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["flood"]
    assert outcome.exit_code == 2
    assert "flooded the harness: more than 2,000 messages within one second" in outcome.error


def test_no_init_ok_is_a_setup_error_naming_every_silent_node(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["no-init"]
    assert outcome.exit_code == 2
    for node in ("n0", "n1", "n2"):
        assert f"{node} did not answer init within 1.5 s" in outcome.error


def test_a_node_that_exits_makes_the_verdict_invalid_with_its_last_words(
    outcomes: dict[str, CheckOutcome],
) -> None:
    outcome = outcomes["exits"]
    assert outcome.exit_code == 1 and outcome.verdict is not None
    assert "exited on its own (status 3)" in outcome.verdict.summary
    assert "giving up on purpose" in outcome.verdict.summary


def test_a_node_that_answers_nothing_leaves_the_verdict_unknown(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["hang"]
    assert outcome.exit_code == 1 and outcome.verdict is not None
    assert outcome.verdict.status == "unknown"
    assert "answered none of its" in outcome.verdict.summary


def test_a_program_that_does_not_exist_is_a_setup_error(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["missing"]
    assert outcome.exit_code == 2
    assert "cannot start '/nonexistent/bhandar-test-node': No such file or directory" in outcome.error


def test_nothing_they_started_is_left_running(outcomes: dict[str, CheckOutcome]) -> None:
    pids = []
    for name, outcome in outcomes.items():
        noted = Path(outcome.options.log_dir) / "data" / "pids"
        if name != "missing":
            assert noted.exists(), name
            pids += [int(p) for p in noted.read_text().split()]
    assert len(pids) >= 15  # three nodes each, and the hanging nodes' children
    assert not [pid for pid in pids if alive(pid)]
