"""check/elle.py and check/dependencies.py on planted histories: each anomaly class is found, with
its cycle quoted, and a serializable history has none; the models decide which ones are invalid."""

from __future__ import annotations

from typing import Any

import pytest

from bhandar_cli.check import dependencies, elle
from bhandar_cli.check.elle import Txn


def txns(*specs: tuple[str, list[list[Any]]] | list[list[Any]]) -> list[Txn]:
    """Transactions #0, #1, ... one after the other in real time; a spec is its micro-ops, or
    (status, micro-ops) for a failed or indefinite one."""
    out = []
    for i, spec in enumerate(specs):
        status, mops = spec if isinstance(spec, tuple) else ("ok", spec)
        out.append(Txn(i, status, tuple((f, k, v) for f, k, v in mops), float(i), i + 0.5))
    return out


def kinds(analysis: elle.Analysis) -> set[str]:
    return {a.kind for a in analysis.anomalies}


APPEND: dict[str, list[Any]] = {
    "G0": [
        [["append", "x", 1], ["append", "y", 2]],
        [["append", "x", 2], ["append", "y", 1]],
        [["r", "x", [1, 2]], ["r", "y", [1, 2]]],
    ],
    "G1a": [("fail", [["append", "x", 1]]), [["r", "x", [1]]]],
    "G1b": [[["append", "x", 1], ["append", "x", 2]], [["r", "x", [1]]]],
    "G1c": [[["append", "x", 1], ["r", "y", [1]]], [["append", "y", 1], ["r", "x", [1]]]],
    "G-single": [
        [["append", "x", 1], ["append", "y", 1]],
        [["r", "x", [1]], ["r", "y", None]],
        [["r", "y", [1]]],
    ],
    "G2": [
        [["r", "x", None], ["append", "y", 1]],
        [["r", "y", []], ["append", "x", 1]],
        [["r", "x", [1]], ["r", "y", [1]]],
    ],
    "internal": [[["append", "x", 5], ["r", "x", []]]],
    "incompatible-order": [
        [["append", "x", 1]],
        [["append", "x", 2]],
        [["r", "x", [1, 2]]],
        [["r", "x", [2, 1]]],
    ],
    "garbage-read": [[["r", "x", [9]]]],
    "duplicate-elements": [[["append", "x", 1]], [["r", "x", [1, 1]]]],
}

REGISTER: dict[str, list[Any]] = {
    "G0": [[["w", "x", 1], ["r", "y", 1], ["w", "y", 2]], [["w", "y", 1], ["r", "x", 1], ["w", "x", 2]]],
    "G1a": [("fail", [["w", "x", 1]]), [["r", "x", 1]]],
    "G1b": [[["w", "x", 1], ["w", "x", 2]], [["r", "x", 1]]],
    "G1c": [[["w", "x", 1], ["r", "y", 1]], [["w", "y", 1], ["r", "x", 1]]],
    "G-single": [[["w", "x", 1], ["w", "y", 1]], [["r", "x", 1], ["r", "y", None]]],
    "G2": [[["w", "x", 1]], [["r", "x", 1], ["w", "x", 2]], [["r", "x", 1], ["w", "x", 3]]],
    "internal": [[["w", "x", 1], ["r", "x", None]]],
    "garbage-read": [[["r", "x", 9]]],
}


@pytest.mark.parametrize("kind", list(APPEND))
def test_list_append_finds_each_planted_anomaly(kind: str) -> None:
    found = dependencies.list_append(txns(*APPEND[kind]))
    assert kinds(found) == {kind}, [a.text for a in found.anomalies]


@pytest.mark.parametrize("kind", list(REGISTER))
def test_rw_register_finds_each_planted_anomaly(kind: str) -> None:
    found = dependencies.rw_register(txns(*REGISTER[kind]))
    assert kinds(found) == {kind}, [a.text for a in found.anomalies]


def test_a_cycle_is_quoted_edge_by_edge() -> None:
    (g2,) = dependencies.list_append(txns(*APPEND["G2"])).anomalies
    assert [s.kind for s in g2.cycle] == ["rw", "rw"]
    assert g2.text == '#0 -rw (key "x": read [], missed 1)-> #1 -rw (key "y": read [], missed 1)-> #0'
    (single,) = dependencies.rw_register(txns(*REGISTER["G-single"])).anomalies
    assert sorted(s.kind for s in single.cycle) == ["rw", "wr"]


def test_a_serializable_history_has_no_anomaly() -> None:
    appended = txns(
        [["append", "x", 1], ["r", "y", None]],
        [["r", "x", [1]], ["append", "y", 1], ["append", "x", 2]],
        [["r", "x", [1, 2]], ["r", "y", [1]], ["append", "y", 2], ["r", "y", [1, 2]]],
        ("fail", [["append", "x", 3]]),
        ("info", [["append", "y", 3]]),
        [["r", "y", [1, 2, 3]], ["r", "x", [1, 2]]],
    )
    found = dependencies.list_append(appended, realtime=True)
    assert found.anomalies == [] and found.edges["ww"] >= 2 and found.edges["rt"] >= 4
    written = txns(
        [["r", "x", None], ["w", "x", 1]],
        [["r", "x", 1], ["w", "x", 2], ["w", "y", 1]],
        [["r", "y", 1], ["r", "x", 2], ["w", "y", 2], ["r", "y", 2]],
        ("fail", [["w", "x", 3]]),
        [["r", "x", 2], ["r", "y", 2]],
    )
    found = dependencies.rw_register(written, realtime=True)
    assert found.anomalies == [] and found.edges["ww"] >= 2


def test_realtime_closes_a_cycle_only_for_the_strict_models() -> None:
    # #0 appends x 1 and completes; #1 begins afterwards and still reads x empty (a stale read).
    stale = txns([["append", "x", 1]], [["r", "x", []]], [["r", "x", [1]]])
    assert kinds(dependencies.list_append(stale)) == set()
    found = dependencies.list_append(stale, realtime=True)
    assert kinds(found) == {"G-single-realtime"}
    assert "strict-serializable" not in {
        m for m, p in elle.PROHIBITED.items() if "G-single-realtime" not in p
    }
    assert "G-single-realtime" not in elle.prohibited(["serializable"])


def test_the_models_prohibit_what_elle_says() -> None:
    assert elle.prohibited(["read-uncommitted"]) >= {"G0"} and "G1a" not in elle.prohibited(
        ["read-uncommitted"]
    )
    assert {"G1a", "G1b", "G1c"} <= elle.prohibited(["read-committed"])
    assert "G2" not in elle.prohibited(["read-committed", "snapshot-isolation"])
    assert "G-single" in elle.prohibited(["snapshot-isolation"])
    assert "G2" in elle.prohibited(["serializable"])


def test_a_read_of_several_aborted_elements_is_one_g1a_per_failed_transaction() -> None:
    found = dependencies.list_append(
        txns(("fail", [["append", "x", 1], ["append", "x", 2]]), [["r", "x", [1, 2]]])
    )
    assert [a.text for a in found.anomalies] == [
        '#1 read key "x" as [1, 2], holding 1, 2 appended by #0, which failed.'
    ]
