"""Every workload against fixture nodes written for it: a correct node passes at two seeds with
every kind of fault, and each deliberately broken node is caught (exit 1) with an explanation
that names the operation it broke. A workload's runs go at once (one trio loop) to keep time."""

from __future__ import annotations

from pathlib import Path

import pytest

from bhandar_cli.check.check_run import run_checks
from bhandar_cli.check.nemesis import Fault
from tests.check.support import ALL_FAULTS, py, short

Broken = list[tuple[tuple[str, ...], tuple[str, ...], str, str]]
# workload -> (correct node, [(broken node, its faults, the problem kind, words naming the operation)])
CASES: dict[str, tuple[tuple[str, ...], Broken]] = {
    "echo": (py("echo.py"), [(py("echo_bad.py"), (), "wrong-echo", "echo 'Please echo")]),
    "unique-ids": (
        py("unique_ids.py"),
        [(py("unique_ids.py", BROKEN="1"), (), "duplicate-id", "was handed out twice: generate")],
    ),
    "broadcast": (
        py("sets.py"),
        [(py("sets.py", MODE="drop"), ("partition",), "lost", "broadcast ")],
    ),
    "g-set": (py("sets.py"), [(py("sets.py", MODE="local"), (), "lost", "add ")]),
    "g-counter": (
        py("counter.py"),
        [(py("counter.py", MODE="twice"), ("duplicate",), "wrong-sum", "an add counted twice")],
    ),
    "pn-counter": (
        py("counter.py"),
        [(py("counter.py", MODE="twice"), ("duplicate",), "wrong-sum", "an add counted twice")],
    ),
    "lin-kv": (
        py("lin_kv.py"),
        [(py("lin_kv.py", MODE="cache"), (), "not-linearizable", "read key")],
    ),
    "dynamo-kv": (
        py("dynamo_kv.py"),
        [
            (py("dynamo_kv.py", MODE="early"), ("partition",), "lost", "acknowledged put(s) lost: "),
            (py("dynamo_kv.py", MODE="ignore"), (), "false-sibling", "should have replaced it"),
        ],
    ),
}

# The operation each workload's checker holds a node to once acknowledged: an echo's answer, an
# id's uniqueness, an element or an add in every final read, a write in the linearization, a put
# in the final gets.
JUDGED = {
    "echo": "echo",
    "unique-ids": "generate",
    "broadcast": "broadcast",
    "g-set": "add",
    "g-counter": "add",
    "pn-counter": "add",
    "lin-kv": "write",
    "dynamo-kv": "put",
}


def _strike(kinds: tuple[str, ...]) -> tuple[Fault, ...]:
    """Faults of these kinds from 0.1 s to 0.9 s of a 1 s run: a partition cuts off n2 (the
    node the test's clients reach last), a duplicate copies everything (clients' requests too:
    the run asks for it)."""
    return tuple(
        Fault(kind, 0.1, 0.9, ("n2",) if kind == "partition" else (), 1.0 if kind == "duplicate" else 0.0)
        for kind in kinds
    )


@pytest.mark.parametrize("workload", list(CASES))
def test_a_correct_node_passes_with_faults_and_broken_ones_are_caught(workload: str, tmp_path: Path) -> None:
    correct, broken = CASES[workload]
    runs = [
        short(correct, workload, tmp_path / f"ok{seed}", seed=seed, nemesis=ALL_FAULTS) for seed in (3, 4)
    ]
    # A broken node's fault strikes for most of its run at full strength (every message of a
    # duplicate fault is delivered twice): drawn faults at a drawn rate could miss every operation
    # that shows the fault, and a machine under load shifts which operations fall in a window.
    runs += [
        short(
            argv,
            workload,
            tmp_path / f"bad{i}",
            seed=5,
            nemesis=faults,
            plan=_strike(faults),
            duplicate_clients="duplicate" in faults,
        )
        for i, (argv, faults, _, _) in enumerate(broken)
    ]
    outcomes = run_checks(runs)
    for outcome in outcomes[:2]:
        assert outcome.faults, "the faults were drawn"
        assert outcome.exit_code == 0, (outcome.options.seed, outcome.error, outcome.verdict)
        # Not a vacuous pass: the verdict judged operations the node acknowledged under the faults.
        # How many a 1 s run of real time completes depends on the machine's load (a slow reply,
        # a killed node's slow restart: each client waits out its timeouts), so no count is asked.
        acknowledged = [op for op in outcome.history.ops if op.ok and op.f == JUDGED[workload]]
        assert acknowledged, (outcome.options.seed, outcome.verdict)
    for outcome, (_, _, kind, words) in zip(outcomes[2:], broken, strict=True):
        assert outcome.exit_code == 1, (outcome.error, outcome.verdict)
        assert outcome.verdict is not None
        assert kind in {p.kind for p in outcome.verdict.problems}, outcome.verdict.summary
        assert words in outcome.verdict.summary
        assert all(p.ops for p in outcome.verdict.problems if p.kind == kind), "each names its operations"


def test_a_javascript_node_passes_broadcast_and_g_set(tmp_path: Path) -> None:
    node = ("node", str(Path(__file__).parent / "nodes" / "broadcast.js"))
    outcomes = run_checks(
        [
            short(node, "broadcast", tmp_path / "b", seed=6, nemesis=ALL_FAULTS),
            short(node, "g-set", tmp_path / "g", seed=7, nemesis=("partition", "kill")),
        ]
    )
    for outcome in outcomes:
        assert outcome.exit_code == 0, (outcome.error, outcome.verdict)
        assert outcome.verdict is not None and outcome.verdict.stats["acknowledged"] >= 1, outcome.verdict
