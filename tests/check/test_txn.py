"""txn-rw-register and txn-list-append: the workloads' transactions, their verdicts by the
consistency models chosen, `--consistency-models` on the command line, and real runs: a correct
node (every transaction on one node) passes with faults, Gossip Glomers #6a/#6b/#6c-style nodes
pass under the models their challenges set, and broken nodes are caught naming the anomaly."""

from __future__ import annotations

import json
from pathlib import Path
from random import Random
from typing import Any

import pytest

from bhandar_cli.check import elle
from bhandar_cli.check.check_run import CheckOptions, run_checks
from bhandar_cli.check.maelstrom_history import INVALID, VALID, MaelstromHistory
from bhandar_cli.check.nemesis import Fault
from bhandar_cli.check.workloads import workloads
from bhandar_cli.check.workloads.txn import KEY_COUNT, MAX_TXN_LENGTH, TxnWorkload
from tests.check.support import NODES, py, short
from tests.check.test_cli import invoke


def workload(name: str, *models: str) -> TxnWorkload:
    made = workloads()[name](Random(1), ["n1"])
    assert isinstance(made, TxnWorkload)
    made.consistency_models = models
    return made


def history(*txns: tuple[str, list[list[Any]]]) -> MaelstromHistory:
    """Transactions one after the other, each (ok | fail, micro-ops as answered)."""
    out = MaelstromHistory()
    for i, (status, mops) in enumerate(txns):
        asked = [[f, k, None if f == "r" else v] for f, k, v in mops]
        op = out.invoke(float(i), "c1", "n1", "txn", asked)
        if status == "ok":
            op.answer(i + 0.5, tuple(tuple(m) for m in mops))
        else:
            op.failed(i + 0.5, 30, "conflict")
    return out


def test_the_generator_asks_as_maelstrom_does() -> None:
    made = workload("txn-list-append")
    ops = [made.next_op(made.rng, 1) for _ in range(400)]
    assert {f for f, _ in ops} == {"txn"}
    assert {len(m) for _, m in ops} == set(range(1, MAX_TXN_LENGTH + 1))
    appended = [(k, v) for _, mops in ops for f, k, v in mops if f == "append"]
    assert len(appended) == len(set(appended)), "every value appended to a key is new"
    assert {f for _, mops in ops for f, _, _ in mops} == {"r", "append"}
    assert all(v is None for _, mops in ops for f, _, v in mops if f == "r")
    assert len({k for k, _ in appended}) > KEY_COUNT, "used keys make way for fresh ones"
    assert made.request("txn", ops[0][1]) == {"type": "txn", "txn": ops[0][1]}


def test_an_aborted_read_is_invalid_unless_the_model_allows_it() -> None:
    planted = history(("fail", [["w", 1, 1]]), ("ok", [["r", 1, 1], ["w", 2, 1]]))
    strict = workload("txn-rw-register").check(planted)
    assert strict.status == INVALID and [p.kind for p in strict.problems] == ["G1a"]
    assert strict.summary.startswith("Not strict-serializable: G1a (aborted read")
    assert "#1 read key 1 = 1, written by #0, which failed." in strict.summary
    assert "txn [w 1 1] -> error 30 (txn-conflict): conflict (#0, c1 at n1" in strict.summary
    loose = workload("txn-rw-register", "read-uncommitted").check(planted)
    assert loose.status == VALID and "Found, and allowed by read-uncommitted: G1a x1." in loose.summary
    assert loose.stats["anomalies"] == {"G1a": 1}


def test_a_cycle_is_quoted_with_its_transactions() -> None:
    skew = history(
        ("ok", [["r", "x", None], ["append", "y", 1]]), ("ok", [["r", "y", None], ["append", "x", 1]])
    )
    skew.ops.extend(history(("ok", [["r", "x", [1]], ["r", "y", [1]]])).ops)
    skew.ops[2].index = 2
    verdict = workload("txn-list-append", "serializable").check(skew)
    assert verdict.status == INVALID and [p.kind for p in verdict.problems] == ["G2"]
    assert 'the cycle #0 -rw (key "x": read [], missed 1)-> #1 -rw (key "y": read [], missed 1)-> #0' in (
        verdict.summary
    )
    assert 'txn [r "x" nil, append "y" 1] -> ok (#0, c1 at n1, 0.000-0.500 s)' in verdict.summary
    assert workload("txn-list-append", "snapshot-isolation").check(skew).status == VALID


def test_an_answer_that_is_not_the_transaction_asked_is_a_problem() -> None:
    planted = history(("ok", [["r", 1, None], ["w", 1, 5]]))
    planted.ops[0].result = (("r", 1, None), ("w", 1, 6))
    verdict = workload("txn-rw-register").check(planted)
    assert [p.kind for p in verdict.problems] == ["wrong-txn"]
    assert "does not answer the transaction asked, [r 1 nil, w 1 5]" in verdict.summary


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["-w", "txn-rw-register", "--consistency-models", "serializable,linearizable"],
            "unknown model 'linearizable'",
        ),
        (
            ["-w", "lin-kv", "--consistency-models", "serializable"],
            "for txn-rw-register or txn-list-append only",
        ),
        (["-w", "txn-list-append", "--consistency-models", " , "], "--consistency-models takes models"),
    ],
)
def test_consistency_model_usage_errors(args: list[str], words: str) -> None:
    result = invoke("check", "--bin", "true", *args)
    assert result.exit_code == 2
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_models_chosen_reach_the_verdict_and_the_repeat_line(tmp_path: Path) -> None:
    argv = " ".join(py("txn_node.py", MODE="local"))
    quick = ["--time-limit", "0.5s", "--rate", "40", "--seed", "2", "--node-count", "1", "-o", "json"]
    models = "read-committed,snapshot-isolation"
    result = invoke(
        "check",
        "--bin",
        argv,
        "-w",
        "txn-rw-register",
        "--log-dir",
        str(tmp_path),
        "--consistency-models",
        models,
        *quick,
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["stats"]["consistency_models"] == ["read-committed", "snapshot-isolation"]
    assert out["repeat"].endswith(f"--consistency-models {models}")


STRIKE = (Fault("partition", 0.1, 0.9, ("n2",), 0.0),)


def _runs(tmp_path: Path) -> list[tuple[CheckOptions, str, set[str]]]:
    """(options, the verdict expected, the problem kinds any of which it must name)."""
    js = ("node", str(NODES / "txn_aborts.js"))
    faults = ("partition", "kill", "pause", "duplicate")
    one = {"node_count": 1, "concurrency": 2}
    two = {"node_count": 2, "concurrency": 4}
    return [
        (
            short(
                py("txn_node.py"),
                "txn-rw-register",
                tmp_path / "leader-rw",
                seed=3,
                nemesis=faults,
                rate=100.0,
                op_timeout=0.2,
                time_limit=1.5,
            ),
            VALID,
            set(),
        ),
        (
            short(
                py("txn_node.py"),
                "txn-list-append",
                tmp_path / "leader-la",
                seed=4,
                nemesis=faults,
                rate=100.0,
                op_timeout=0.2,
                time_limit=1.5,
            ),
            VALID,
            set(),
        ),
        # Gossip Glomers #6a, #6b, #6c, each under the models and faults of its challenge.
        (
            short(
                py("txn_node.py", MODE="local"),
                "txn-rw-register",
                tmp_path / "6a",
                **one,
                consistency_models=("read-uncommitted",),
            ),
            VALID,
            set(),
        ),
        (
            short(
                py("txn_node.py", MODE="uncommitted"),
                "txn-rw-register",
                tmp_path / "6b",
                **two,
                nemesis=("partition",),
                plan=STRIKE,
                consistency_models=("read-uncommitted",),
            ),
            VALID,
            set(),
        ),
        (
            short(
                py("txn_node.py", MODE="committed"),
                "txn-rw-register",
                tmp_path / "6c",
                **two,
                nemesis=("partition",),
                plan=STRIKE,
                consistency_models=("read-committed",),
            ),
            VALID,
            set(),
        ),
        # Broken: writes of refused transactions stay visible; replicas that diverge; reads from
        # a stale copy (no isolation).
        (
            short(py("txn_node.py", MODE="stale"), "txn-rw-register", tmp_path / "stale", **one),
            INVALID,
            {"G-single-realtime", "G-nonadjacent-realtime", "G2-realtime", "G-single", "G-nonadjacent", "G2"},
        ),
        (short(js, "txn-rw-register", tmp_path / "js-rw", **one), INVALID, {"G1a"}),
        (short(js, "txn-list-append", tmp_path / "js-la", **one), INVALID, {"G1a"}),
        (
            short(
                py("txn_node.py", MODE="committed"),
                "txn-list-append",
                tmp_path / "diverge",
                **two,
                nemesis=("partition",),
                plan=STRIKE,
                consistency_models=("serializable",),
            ),
            INVALID,
            {"incompatible-order", "G-single", "G-nonadjacent", "G2"},
        ),
    ]


def test_correct_and_challenge_nodes_pass_and_broken_ones_are_caught(tmp_path: Path) -> None:
    cases = _runs(tmp_path)
    outcomes = run_checks([opts for opts, _, _ in cases])
    for outcome, (opts, expected, kinds) in zip(outcomes, cases, strict=True):
        verdict = outcome.verdict
        assert verdict is not None, (opts.log_dir, outcome.error)
        assert verdict.status == expected, (opts.log_dir, verdict.summary)
        # Something to judge: the leader runs lose most of their transactions to faults on the
        # leader, and a loaded machine answers fewer still.
        assert sum(op.ok for op in outcome.history.ops) >= 5, opts.log_dir
        if kinds:
            found = {p.kind for p in verdict.problems}
            assert found & kinds, (opts.log_dir, found)
            assert any(p.ops and p.text.startswith(tuple(kinds)) for p in verdict.problems)


def test_anomalies_past_those_quoted_are_counted() -> None:
    aborted = [("fail", [["w", k, 1]]) for k in range(7)]
    reads = [("ok", [["r", k, 1]]) for k in range(7)]
    planted = history(("ok", [["r", 0, None], ["w", 0, 5]]), *aborted, *reads)
    planted.ops[0].result = (("r", 0, None), ("w", 0, 6))  # and one answer that is not its request
    verdict = workload("txn-rw-register").check(planted)
    assert [p.kind for p in verdict.problems] == ["wrong-txn"] + ["G1a"] * elle.PER_KIND
    assert f"({7 - elle.PER_KIND} more of these kinds not quoted.)" in verdict.summary
