"""`bhandar node maelstrom` through the same door as anyone's node: dynamo-kv passes under
partitions and kills; lin-kv is shown not linearizable, with a concrete pair of operations and a
report whose diagram has their messages."""

from __future__ import annotations

import shutil

import pytest

from bhandar_cli.check.check_run import CheckOutcome, run_checks
from bhandar_cli.check.html import page
from tests.check.support import short

BHANDAR = shutil.which("bhandar")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CheckOutcome]:
    assert BHANDAR is not None
    root = tmp_path_factory.mktemp("bhandar-node")
    runs = [
        short(
            (BHANDAR, "node", "maelstrom"),
            "dynamo-kv",
            root / "dynamo",
            seed=11,
            time_limit=2.0,
            nemesis=("partition", "kill"),
            interval=0.6,
            op_timeout=1.5,
            recovery=1.0,
            rate=40.0,
        ),
        # At ONE, a node cut off by a partition still answers reads from its own copy, which misses
        # the writes the other side acknowledged meanwhile (clients reach every node).
        short(
            (BHANDAR, "node", "maelstrom", "-c", "ONE"),
            "lin-kv",
            root / "lin",
            seed=12,
            time_limit=2.0,
            nemesis=("partition",),
            op_timeout=1.5,
            rate=80.0,
        ),
        # At QUORUM with no fault, last-writer-wins across nodes is linearizable on one machine, but
        # only if every node stamps writes on one time line (each process once had its own).
        short(
            (BHANDAR, "node", "maelstrom"),
            "lin-kv",
            root / "lin-quorum",
            seed=13,
            time_limit=2.0,
            op_timeout=1.5,
            rate=80.0,
        ),
    ]
    return dict(zip(("dynamo", "lin", "lin-quorum"), run_checks(runs), strict=True))


def test_dynamo_kv_passes_under_partitions_and_kills(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["dynamo"]
    assert outcome.exit_code == 0, (outcome.error, outcome.verdict)
    assert outcome.restarts >= 1 and {f.kind for f in outcome.faults} == {"partition", "kill"}
    assert outcome.verdict is not None and outcome.verdict.stats["acknowledged_puts"] >= 10
    assert outcome.messages["node"] > 100  # the nodes replicated through the harness


def test_lin_kv_is_not_linearizable_and_the_report_shows_the_pair(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["lin"]
    assert outcome.exit_code == 1, (outcome.error, outcome.verdict)
    assert outcome.verdict is not None
    problem = outcome.verdict.problems[0]
    assert problem.kind == "not-linearizable"
    assert "The pair: #" in problem.text and "although #" in problem.text
    assert 2 <= len(problem.ops) <= 4
    html = page(outcome)
    assert 'class="lamport"' in html and 'class="own"' in html


def test_lin_kv_at_quorum_without_faults_is_linearizable(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["lin-quorum"]
    assert outcome.exit_code == 0, (outcome.error, outcome.verdict)
    assert outcome.verdict is not None and outcome.verdict.stats["ops_checked"] >= 20


def test_cas_is_answered_not_supported(outcomes: dict[str, CheckOutcome]) -> None:
    cas = [op for op in outcomes["lin"].history.ops if op.f == "cas"]
    assert cas and all(op.type == "fail" and op.code == 10 for op in cas)
