r"""Golden tests: `bhandar sim ...` prints exactly what the seed's JavaScript simulators print.

How the golden files in tests/golden/ were made (node v20.20.2, from the repository root):

With the defaults, from the original, unedited seed scripts (the seed text's seed/sims/
directory, which is not part of this repository; SEED below is where it is checked out):

    node $SEED/sims/part1-ring.js      > tests/golden/part1-ring.txt
    node $SEED/sims/part2-quorum.js    > tests/golden/part2-quorum.txt
    node $SEED/sims/part3-versions.js  > tests/golden/part3-versions.txt
    node $SEED/sims/part4-ministore.js > tests/golden/part4-ministore.txt

With other parameters, from the copies in tests/golden/js/, edited only to read their parameters
from the command line (`const arg = ...` on line 2 and `Number(arg("seed", 61))` where the
constant was; the defaults are unchanged, and part3-versions.js, which has no parameters, is an
unchanged copy):

    cd tests/golden
    node js/part1-ring.js --seed 7 --keys 5000 --vnodes 2,8,64 > part1-ring.seed7.keys5000.vnodes2-8-64.txt
    node js/part1-ring.js --seed 12345 --keys 333 --vnodes 1,3,1000 \
        > part1-ring.seed12345.keys333.vnodes1-3-1000.txt
    node js/part2-quorum.js --seed 11 --rounds 10000 > part2-quorum.seed11.rounds10000.txt
    node js/part2-quorum.js --seed 5 --rounds 2500 > part2-quorum.seed5.rounds2500.txt
    node js/part2-quorum.js --seed 3 --rounds 7777 > part2-quorum.seed3.rounds7777.txt
    node js/part4-ministore.js --seed 99 --ops 3000 --keys 120 --detect 150 \
        > part4-ministore.seed99.ops3000.keys120.detect150.txt
    node js/part4-ministore.js --seed 1 --ops 9000 --keys 50 --detect 0 \
        > part4-ministore.seed1.ops9000.keys50.detect0.txt
    node js/part4-ministore.js --seed 4294967295 --ops 6400 --keys 1000 --detect 350 \
        > part4-ministore.seed4294967295.ops6400.keys1000.detect350.txt

The comparisons below need no node. When node is on PATH, the tests at the end also run the
JavaScript live: the copies with defaults must reproduce the default goldens (so the copies are
faithful), and a few more parameter sets must agree with the Python port.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bhandar_cli.cli.app import app
from bhandar_cli.sim.seeds.seed_js import js_number_to_string, js_round, js_to_fixed
from bhandar_cli.sim.seeds.seed_ministore import simulate_ministore
from bhandar_cli.sim.seeds.seed_quorum import simulate_quorum
from bhandar_cli.sim.seeds.seed_ring import simulate_ring

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
runner = CliRunner()

DEFAULTS = [
    ("part1-ring", "ring"),
    ("part2-quorum", "quorum"),
    ("part3-versions", "versions"),
    ("part4-ministore", "ministore"),
]

NON_DEFAULT = [
    (
        "part1-ring.seed7.keys5000.vnodes2-8-64",
        ["ring", "--seed", "7", "--keys", "5000", "--vnodes", "2,8,64"],
    ),
    (
        "part1-ring.seed12345.keys333.vnodes1-3-1000",
        ["ring", "--seed", "12345", "--keys", "333", "--vnodes", "1,3,1000"],
    ),
    ("part2-quorum.seed11.rounds10000", ["quorum", "--seed", "11", "--rounds", "10000"]),
    ("part2-quorum.seed5.rounds2500", ["quorum", "--seed", "5", "--rounds", "2500"]),
    ("part2-quorum.seed3.rounds7777", ["quorum", "--seed", "3", "--rounds", "7777"]),
    (
        "part4-ministore.seed99.ops3000.keys120.detect150",
        ["ministore", "--seed", "99", "--ops", "3000", "--keys", "120", "--detect", "150"],
    ),
    (
        "part4-ministore.seed1.ops9000.keys50.detect0",
        ["ministore", "--seed", "1", "--ops", "9000", "--keys", "50", "--detect", "0"],
    ),
    (
        "part4-ministore.seed4294967295.ops6400.keys1000.detect350",
        ["ministore", "--seed", "4294967295", "--ops", "6400", "--keys", "1000", "--detect", "350"],
    ),
]


def golden(name: str) -> bytes:
    return (GOLDEN / f"{name}.txt").read_bytes()


def sim(*args: str) -> bytes:
    result = runner.invoke(app, ["sim", *args])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    return result.stdout_bytes


def sim_json(*args: str) -> dict[str, Any]:
    out = sim(*args, "-o", "json").decode()
    # One JSON object per command, on one line.
    assert out.endswith("\n") and out.count("\n") == 1
    obj = json.loads(out)
    assert obj["ok"] is True and obj["cmd"] == f"sim {args[0]}"
    assert isinstance(obj, dict)
    return obj


@pytest.mark.parametrize(("name", "command"), DEFAULTS)
def test_defaults_match_the_seed_byte_for_byte(name: str, command: str) -> None:
    assert sim(command) == golden(name)


@pytest.mark.parametrize(("name", "args"), NON_DEFAULT)
def test_other_parameters_match_node_byte_for_byte(name: str, args: list[str]) -> None:
    assert sim(*args) == golden(name)


def test_python_dash_m_entry_point_prints_the_seed_table() -> None:
    # The real entry point and a real pipe, not the test runner's captured streams.
    done = subprocess.run(
        [sys.executable, "-m", "bhandar_cli", "sim", "ring"], capture_output=True, check=True, timeout=60
    )
    assert done.stdout == golden("part1-ring")
    assert done.stderr == b""


# --- JSON gives the same figures as the table -------------------------------------------------


def _ring_agrees(args: list[str]) -> None:
    table = sim("ring", *args).decode().splitlines()
    obj = sim_json("ring", *args)
    assert len(table) == len(obj["rows"]) + 2
    for line, row in zip(table[1:-1], obj["rows"], strict=True):
        v, *counts, sd, ratio, moved = line.split()
        assert int(v) == row["vnodes"]
        assert [int(c) for c in counts] == [row["counts"][n] for n in obj["nodes"]]
        assert sum(row["counts"].values()) == obj["keys"]
        assert sd == js_number_to_string(js_round(row["stddev"]))
        assert ratio == js_to_fixed(row["max_over_mean"], 2)
        assert moved == js_to_fixed(row["moved_pct"], 1) + "%"
        assert row["moved_pct"] == 100 * row["moved"] / obj["keys"]
    naive = re.fullmatch(
        r"naive hash mod N \(4 -> 5 servers\) moves ([\d.]+)% of keys; ideal is ([\d.]+)%", table[-1]
    )
    assert naive is not None
    assert naive[1] == js_to_fixed(obj["naive_moved_pct"], 1)
    assert naive[2] == js_to_fixed(obj["ideal_moved_pct"], 1)


QUORUM_LINE = re.compile(
    r"\(R,W\)=\((\d+),(\d+)\)  put ok ([\d.]+)%  get ok ([\d.]+)%  "
    r"put p99 ([\d.]+) ms  get p99 ([\d.]+) ms  stale reads (\d+)"
)


def _quorum_agrees(args: list[str]) -> None:
    table = sim("quorum", *args).decode().splitlines()
    obj = sim_json("quorum", *args)
    assert len(table) == len(obj["runs"]) == 3
    for line, run in zip(table, obj["runs"], strict=True):
        m = QUORUM_LINE.fullmatch(line)
        assert m is not None, line
        assert (int(m[1]), int(m[2])) == (run["r"], run["w"])
        assert m[3] == js_to_fixed(run["put_ok_pct"], 1)
        assert m[4] == js_to_fixed(run["get_ok_pct"], 1)
        assert m[5] == js_to_fixed(run["put_p99_ms"], 1)
        assert m[6] == js_to_fixed(run["get_p99_ms"], 1)
        assert int(m[7]) == run["stale_reads"]
        assert run["put_ok_pct"] == 100 * run["put_ok"] / obj["rounds"]


MINISTORE_LINE = re.compile(
    r"(.{19})availability ([\d.]+)%  stale reads (\d+)  hints stored (\d+)  delivered (\d+)"
)


def _ministore_agrees(args: list[str]) -> None:
    table = sim("ministore", *args).decode().splitlines()
    obj = sim_json("ministore", *args)
    assert len(table) == len(obj["modes"]) == 3
    for line, run in zip(table, obj["modes"], strict=True):
        m = MINISTORE_LINE.fullmatch(line)
        assert m is not None, line
        assert m[1].rstrip() == run["mode"]
        assert m[2] == js_to_fixed(run["availability_pct"], 2)
        assert [int(m[3]), int(m[4]), int(m[5])] == [
            run["stale_reads"],
            run["hints_stored"],
            run["hints_delivered"],
        ]
        assert run["tries"] == obj["ops"]


@pytest.mark.parametrize("args", [[], ["--seed", "7", "--keys", "5000", "--vnodes", "2,8,64"]])
def test_ring_json_agrees_with_table(args: list[str]) -> None:
    _ring_agrees(args)


@pytest.mark.parametrize("args", [[], ["--seed", "3", "--rounds", "7777"]])
def test_quorum_json_agrees_with_table(args: list[str]) -> None:
    _quorum_agrees(args)


@pytest.mark.parametrize("args", [[], ["--seed", "99", "--ops", "3000", "--keys", "120", "--detect", "150"]])
def test_ministore_json_agrees_with_table(args: list[str]) -> None:
    _ministore_agrees(args)


def _clock(text: str) -> dict[str, int]:
    """Parse the seed's `{A:2, B:1}`."""
    inner = text.strip("{}")
    return {k: int(v) for k, v in (p.split(":") for p in inner.split(", "))} if inner else {}


def test_versions_json_agrees_with_table() -> None:
    table = sim("versions").decode().splitlines()
    steps = sim_json("versions")["steps"]
    assert len(table) == len(steps)
    for line, step in zip(table, steps, strict=True):
        match step["step"]:
            case "put":
                m = re.fullmatch(r"put via (\w) (\[.*\]) clock (\{.*\})", line)
                assert m is not None, line
                assert m[1] == step["via"]
                assert json.loads(m[2]) == step["items"]
                assert _clock(m[3]) == step["clock"]
            case "state" | "delivered":
                state = line.split("  ")[-3:]
                for part in state:
                    node, _, clocks = part.partition("=")
                    assert [_clock(c) for c in clocks.split(" & ")] == step["replicas"][node]
                if step["step"] == "delivered":
                    assert line.startswith(f"  delivered in order {','.join(step['order'])}  ")
            case "note":
                assert line == "-- " + step["text"]
            case "compare":
                assert step["relation"] == "concurrent"
                assert line == "  v2 vs v3: concurrent -> siblings"
            case "get":
                m = re.fullmatch(
                    r"get via (\w) -> (\d+) siblings, context (\{.*\}), client merges to (\[.*\])", line
                )
                assert m is not None, line
                assert (m[1], int(m[2])) == (step["via"], step["siblings"])
                assert _clock(m[3]) == step["context"]
                assert json.loads(m[4]) == step["merged"]
            case "lww":
                m = re.fullmatch(
                    r"LWW instead \((.*) vs (.*)\): keeps (\[.*\]), silently drops (\[.*\])", line
                )
                assert m is not None, line
                assert [m[1], m[2]] == step["timestamps"]
                assert (json.loads(m[3]), json.loads(m[4])) == (step["kept"], step["dropped"])
            case other:
                pytest.fail(f"unexpected step {other}")


# --- bad input --------------------------------------------------------------------------------

BAD = [
    ["ring", "--vnodes", "0"],
    ["ring", "--vnodes", "x"],
    ["ring", "--vnodes", "1,,2"],
    ["ring", "--vnodes", ""],
    ["ring", "--keys", "-5"],
    ["ring", "--keys", "0"],
    ["ring", "--keys", "1e3"],
    ["ring", "--seed", "x"],
    ["ring", "--seed", "4294967296"],
    ["quorum", "--rounds", "0"],
    ["quorum", "--seed", "-1"],
    ["ministore", "--ops", "0"],
    ["ministore", "--keys", "abc"],
    ["ministore", "--detect", "-1"],
]


@pytest.mark.parametrize("args", BAD)
def test_bad_input_is_a_one_line_usage_error(args: list[str]) -> None:
    result = runner.invoke(app, ["sim", *args])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("bhandar: ") and result.stderr.count("\n") == 1
    assert args[1] in result.stderr  # names the option at fault


def test_simulators_refuse_empty_runs() -> None:
    # JavaScript would print NaN (or throw) for these; the port refuses them up front.
    with pytest.raises(ValueError):
        simulate_ring(keys=0)
    with pytest.raises(ValueError):
        simulate_ring(vnodes=[])
    with pytest.raises(ValueError):
        simulate_quorum(rounds=0)
    with pytest.raises(ValueError):
        simulate_ministore(ops=0)


# --- live node (optional) ---------------------------------------------------------------------

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


def _node(script: str, *args: str) -> bytes:
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(GOLDEN / "js" / f"{script}.js"), *args], capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@needs_node
@pytest.mark.parametrize(("name", "_command"), DEFAULTS)
def test_live_js_copies_with_defaults_reproduce_the_seed(name: str, _command: str) -> None:
    assert _node(name) == golden(name)


LIVE = [
    ("part1-ring", ["ring", "--seed", "0", "--keys", "1", "--vnodes", "1"]),
    ("part1-ring", ["ring", "--seed", "2026", "--keys", "7001", "--vnodes", "5,50,500"]),
    ("part2-quorum", ["quorum", "--seed", "0", "--rounds", "1"]),
    ("part2-quorum", ["quorum", "--seed", "123456789", "--rounds", "6001"]),
    ("part4-ministore", ["ministore", "--seed", "0", "--ops", "1", "--keys", "1", "--detect", "0"]),
    (
        "part4-ministore",
        ["ministore", "--seed", "31337", "--ops", "7000", "--keys", "2000", "--detect", "999"],
    ),
]


@needs_node
@pytest.mark.parametrize(("script", "args"), LIVE)
def test_live_node_agrees_on_more_parameters(script: str, args: list[str]) -> None:
    assert sim(*args) == _node(script, *args[1:])


def sim_bloom(*args: str) -> subprocess.CompletedProcess[str]:
    """`bhandar sim bloom ARGS` in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "bhandar_cli", "sim", "bloom", *args], capture_output=True, text=True
    )


def bloom_report(*args: str) -> dict[str, Any]:
    done = sim_bloom(*args, "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_sim_bloom_measures_within_ten_percent_of_theory() -> None:
    r = bloom_report()
    assert abs(r["theoretical"] - 0.0082) < 0.0001
    assert abs(r["measured"] - r["theoretical"]) / r["theoretical"] < 0.10


def test_sim_bloom_blocked_measures_the_filter_tables_use() -> None:
    blocked, classic = bloom_report("--keys", "50000", "--filter", "blocked"), bloom_report("--keys", "50000")
    assert blocked["filter"] == "blocked" and classic["filter"] == "classic"
    # One block per key costs false positives: above the classic filter, in theory and measured.
    assert blocked["theoretical"] > classic["theoretical"]
    assert blocked["measured"] > classic["measured"]
    assert abs(blocked["measured"] - blocked["theoretical"]) / blocked["theoretical"] < 0.30
    bad = sim_bloom("--filter", "cuckoo")
    assert bad.returncode == 2 and "--filter must be classic or blocked" in bad.stderr
