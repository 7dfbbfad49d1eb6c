"""The harness's parts on their own: the protocol's decoder and error table, the services, the
nemesis plan drawn from a seed, the counters' possible sums and the staleness curve."""

from __future__ import annotations

import itertools
import shlex
from random import Random

import pytest

from bhandar_cli.check.catalog import KINDS, SCENARIOS, WORKLOADS
from bhandar_cli.check.check_report import repeat_command
from bhandar_cli.check.check_run import CheckOptions
from bhandar_cli.check.nemesis import Fault, draw, scenario
from bhandar_cli.check.protocol import MaelstromProtocolError, decode, definite, encode
from bhandar_cli.check.services import services
from bhandar_cli.check.staleness import curve, render
from bhandar_cli.check.workloads import workloads
from bhandar_cli.check.workloads.counters import possible_sums


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (b"hello", "not JSON"),
        (b"[1, 2]", "not a message object"),
        (b'{"src": "n1", "dest": "c1"}', 'object "body"'),
        (b'{"src": "n2", "dest": "c1", "body": {"type": "x"}}', "claiming to come from 'n2'"),
        (b'{"src": "n1", "dest": "c1", "body": {"msg_id": 1}}', 'without a string "type"'),
        (b'{"src": "n1", "dest": "c1", "body": {"type": "x", "msg_id": "1"}}', '"msg_id" is not an integer'),
        (
            b'{"src": "n1", "dest": "c1", "body": {"type": "x", "in_reply_to": true}}',
            '"in_reply_to" is not an',
        ),
    ],
)
def test_a_bad_line_is_a_protocol_error_naming_the_node(line: bytes, words: str) -> None:
    with pytest.raises(MaelstromProtocolError) as caught:
        decode(line, "n1")
    assert str(caught.value).startswith("n1 wrote") and words in str(caught.value)


def test_a_good_line_decodes_and_round_trips() -> None:
    raw = encode("n1", "c2", {"type": "read_ok", "in_reply_to": 4, "value": [1]})
    msg = decode(raw.rstrip(b"\n"), "n1")
    assert (msg.dest, msg.type, msg.in_reply_to, msg.body["value"]) == ("c2", "read_ok", 4, [1])


def test_definite_and_indefinite_errors() -> None:
    assert [c for c in (0, 1, 10, 11, 12, 13, 14, 20, 21, 22, 30, 1000) if definite(c)] == [
        1,
        10,
        11,
        12,
        14,
        20,
        21,
        22,
        30,
    ]


def test_the_services_keep_their_promises() -> None:
    svc = services(Random(1))
    lin = svc["lin-kv"]
    assert lin("n1", {"type": "read", "key": 1})["code"] == 20
    assert (
        lin("n1", {"type": "cas", "key": 1, "from": 0, "to": 1, "create_if_not_exists": True})["type"]
        == "cas_ok"
    )
    assert lin("n2", {"type": "cas", "key": 1, "from": 0, "to": 2})["code"] == 22
    assert lin("n2", {"type": "read", "key": 1}) == {"type": "read_ok", "value": 1}
    seq = svc["seq-kv"]
    for v in range(5):
        seq("n1", {"type": "write", "key": "k", "value": v})
    seen = [seq("n2", {"type": "read", "key": "k"}).get("value") for _ in range(20)]
    assert seen == sorted(seen, key=lambda v: -1 if v is None else v)  # n2's view only moves forward
    lww = svc["lww-kv"]
    lww("n1", {"type": "write", "key": "k", "value": 1})
    assert {lww("n1", {"type": "read", "key": "k"}).get("type") for _ in range(30)} >= {"read_ok", "error"}
    assert [svc["lin-tso"]("n1", {"type": "ts"})["ts"] for _ in range(3)] == [0, 1, 2]


def test_the_faults_are_drawn_from_the_seed_and_end_by_the_time_limit() -> None:
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    first = draw(Random(7), list(KINDS), nodes, 10.0, 1.0)
    assert first == draw(Random(7), list(KINDS), nodes, 10.0, 1.0)
    assert first != draw(Random(8), list(KINDS), nodes, 10.0, 1.0)
    assert {f.kind for f in first} == set(KINDS)
    assert all(0 <= f.start < f.end <= 10.0 for f in first)
    for kind in KINDS:  # one fault of a kind at a time
        spans = [(f.start, f.end) for f in first if f.kind == kind]
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert next(f.text(nodes) for f in first if f.kind == "partition").count("|") == 1


def test_every_checklist_scenario_has_its_faults() -> None:
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    plans = {name: scenario(name, nodes, 10.0) for name in SCENARIOS}
    assert plans["no fault"] == []
    assert [f.nodes for f in plans["two nodes down"]] == [("n5",), ("n4",)]
    assert plans["minority partition"][0].nodes == ("n4", "n5")
    assert {f.kind for f in plans["hint holder killed"]} == {"partition", "kill"}
    assert len(plans["restarts"]) == 5 and plans["slow replica"][0].amount == 0.1


def test_possible_sums_are_exact_while_small() -> None:
    assert possible_sums(10, [2, 3]) == ({10, 12, 13, 15}, 10, 15)
    assert possible_sums(0, [5, -5]) == ({-5, 0, 5}, -5, 5)
    assert possible_sums(0, [1] * 50_000)[0] == set(range(50_001))
    sums, low, high = possible_sums(0, [10] * 200_000)
    assert sums is None and (low, high) == (0, 2_000_000)


def test_the_staleness_curve() -> None:
    points, worst = curve([(0.0005, False), (0.0007, True), (0.003, True), (2.0, True)])
    assert points == ((1.0, 0.5, 2), (5.0, 1.0, 1), (5000.0, 1.0, 1))
    assert worst == pytest.approx(0.5)
    assert "50.0% fresh" in render(points, worst) and "0.5 ms after" in render(points, worst)


def test_the_catalog_names_every_workload_in_order() -> None:
    assert list(workloads()) == list(WORKLOADS)
    assert all(cls.doc == WORKLOADS[name] for name, cls in workloads().items())


def test_the_repeat_command_names_every_option_that_differs_from_its_default() -> None:
    opts = CheckOptions(
        argv=("my node", "-x"),
        workload="g-set",
        log_dir="logs",
        node_count=5,
        concurrency=2,
        rate=40.0,
        time_limit=3.0,
        latency_ms=0.0,
        seed=7,
        nemesis=("kill",),
        interval=0.5,
    )
    assert shlex.split(repeat_command(opts)) == [
        *("bhandar", "check", "--bin", "'my node' -x", "-w", "g-set", "--node-count", "5"),
        *("--concurrency", "2", "--rate", "40", "--time-limit", "3s", "--seed", "7"),
        *("--nemesis", "kill", "--nemesis-interval", "0.5s"),
    ]
    slow = CheckOptions(
        argv=("n",),
        workload="echo",
        log_dir="logs",
        op_timeout=1.5,
        recovery=0.0,
        init_timeout=30.0,
        flood_limit=50,
    )
    assert repeat_command(slow).endswith("--timeout 1.5s --recovery 0s --init-timeout 30s --flood-limit 50")


def test_a_run_whose_faults_the_caller_gave_says_its_repeat_command_runs_without_them() -> None:
    plan = (Fault("duplicate", 0.1, 0.9, ("n2",), 1.0),)
    line = repeat_command(
        CheckOptions(
            argv=("n",), workload="pn-counter", log_dir="logs", seed=3, nemesis=("duplicate",), plan=plan
        )
    )
    assert "--nemesis" not in line
    assert line.endswith("# without its faults: they were given by the caller (CheckOptions.plan), not drawn")
