"""The lin-kv checker: its search agrees with brute force on small histories (indefinite
operations and failed cas included), it decides long histories, its counterexamples are small
and prove the failure, and a search past its budget is unknown, never a guess."""

from __future__ import annotations

import itertools
import math
from random import Random

import pytest

from bhandar_cli.check.bench import register_history, spoil_a_read
from bhandar_cli.check.linearizable import (
    ABSENT,
    CutOff,
    RegOp,
    check_registers,
    decide,
    explain,
    linearizable,
    step,
)
from bhandar_cli.check.maelstrom_history import MaelstromHistory
from bhandar_cli.check.workloads.lin_kv import LinKv


def brute(ops: list[RegOp]) -> bool:
    """Some order of some indefinite operations and all the others respects real time and replays."""
    sure = [o for o in ops if o.ret != math.inf]
    unsure = [o for o in ops if o.ret == math.inf]
    for k in range(len(unsure) + 1):
        for chosen in itertools.combinations(unsure, k):
            for order in itertools.permutations(sure + list(chosen)):
                if any(b.ret < a.call for i, a in enumerate(order) for b in order[i + 1 :]):
                    continue
                state: str | None = ABSENT
                for o in order:
                    state = step(state, o) if state is not None else None
                if state is not None:
                    return True
    return False


def random_history(rng: Random, n: int) -> list[RegOp]:
    ops = []
    for i in range(n):
        call = rng.uniform(0, 10)
        ret = math.inf if rng.random() < 0.2 else call + rng.uniform(0.1, 3)
        kind = rng.choice(["r", "r", "w", "w", "cas", "cas-fail", "cas-absent"])
        if ret == math.inf and kind not in ("w", "cas"):
            ret = call + 1
        value = rng.choice([ABSENT, "1", "2", "3"]) if kind == "r" else rng.choice(["1", "2", "3"])
        ops.append(RegOp(i, call, ret, kind, value, rng.choice(["1", "2", "3"])))
    return ops


def test_the_search_agrees_with_brute_force() -> None:
    rng = Random(29)
    verdicts = set()
    for _ in range(400):
        ops = random_history(rng, rng.randint(1, 6))
        expected = brute(ops)
        assert linearizable(ops) == expected, ops
        assert decide(ops) == expected, ops
        verdicts.add(expected)
        if not expected:
            witness = explain(ops)
            assert not brute(witness), (ops, witness)  # the counterexample fails on its own
    assert verdicts == {True, False}


def stale_read() -> list[RegOp]:
    return [
        RegOp(0, 0, 1, "w", "1"),
        RegOp(1, 2, 3, "w", "2"),
        RegOp(2, 2.5, 3.5, "r", "2"),
        RegOp(3, 4, 5, "r", "1"),
    ]


def test_a_stale_read_is_explained_by_the_writes_it_missed() -> None:
    ops = [*stale_read(), RegOp(9, 0.2, 0.4, "r", "1")]
    assert not decide(ops)
    assert sorted(o.id for o in explain(ops)) == [0, 1, 3]


def test_an_indefinite_write_may_take_effect_late_or_never() -> None:
    late = [RegOp(0, 0, 1, "w", "1"), RegOp(1, 0.5, math.inf, "w", "2"), RegOp(2, 5, 6, "r", "2")]
    never = [RegOp(0, 0, 1, "w", "1"), RegOp(1, 0.5, math.inf, "w", "2"), RegOp(2, 5, 6, "r", "1")]
    assert decide(late) and decide(never)
    assert not decide([*never, RegOp(3, 7, 8, "r", "2"), RegOp(4, 9, 10, "r", "1")])


def test_the_workload_history_of_10000_operations_is_decided_both_ways() -> None:
    history = register_history(10_000, 5, seed=3)
    assert all(r.status == "valid" for r in check_registers(history.ops))
    spoil_a_read(history)
    verdict = LinKv(Random(0), ["n1"]).check(history)
    assert verdict.status == "invalid"
    assert "The pair: #" in verdict.problems[0].text
    assert len(verdict.problems[0].ops) == 3


def test_one_key_with_every_operation_is_decided() -> None:
    assert all(r.status == "valid" for r in check_registers(register_history(3_000, 5, 4, one_key=True).ops))


def test_a_search_past_its_budget_is_unknown() -> None:
    history = register_history(400, 5, seed=5, one_key=True)
    spoil_a_read(history)
    results = check_registers(history.ops, budget=3)
    assert [r.status for r in results] == ["unknown"]
    assert "more than 3 states" in results[0].why
    verdict = LinKv(Random(0), ["n1"]).check(MaelstromHistory())
    assert verdict.status == "valid"  # nothing to contradict
    with pytest.raises(CutOff):
        linearizable(stale_read(), budget=1)
