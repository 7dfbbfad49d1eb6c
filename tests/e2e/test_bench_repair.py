"""`bhandar bench repair`: the report's fields after a real partition, write, heal and convergence.

Only the shape and sanity of the figures are checked: benchmarks are commands, not timed tests.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import run_cli


def test_bench_repair_converges_and_reports_both_times() -> None:
    # The run starts and stops a 5-process cluster of its own.
    proc = run_cli("bench", "repair", "--keys", "200", "-o", "json", timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["cmd"] == "bench repair" and report["ok"] is True and report["converged"] is True
    assert report["nodes"] == 5 and report["keys"] == 200 and report["errors"] == 0
    assert report["isolated"] == "E" and report["not_converged"] == []
    for name in ("write_s", "converge_s", "stream_s"):
        assert isinstance(report[name], float) and report[name] > 0, name
    assert report["ratio"] == round(report["converge_s"] / report["stream_s"], 3)
    # The isolated node missed its share of the writes: hints or anti-entropy brought them over.
    assert report["hints_delivered"] + report["keys_repaired"] > 0
    assert report["repair_sessions"] > 0


@pytest.mark.parametrize("args", [("--keys", "0"), ("--nodes", "2"), ("--timeout", "0")])
def test_bench_repair_usage_errors(args: tuple[str, ...]) -> None:
    assert run_cli("bench", "repair", *args).returncode == 2
