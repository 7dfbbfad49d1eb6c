"""`bhandar bench big`: values at the size limit written, replicated, hinted and handed off, and
repaired on a process cluster while small requests flow, and no live node seen down meanwhile.

The functional side is asserted; the latencies are only reported (benchmarks are commands, not
timed tests)."""

from __future__ import annotations

import json
import os

from bhandar_cli.core.model.limits import MAX_VALUE_BYTES
from tests.e2e.conftest import run_cli


def test_bench_big_moves_values_at_the_limit_without_a_node_seen_down() -> None:
    # The run starts and stops a 4-process cluster of its own.
    proc = run_cli("bench", "big", "--big", "4", "--seconds", "1", "-o", "json", timeout=600)
    report = json.loads(proc.stdout)
    assert report["cmd"] == "bench big" and report["ok"] is True, json.dumps(report)
    assert proc.returncode == 0, proc.stderr
    assert report["value_bytes"] == MAX_VALUE_BYTES and report["big_values"] == 12
    assert report["replicas_holding_big_value"] == 3  # read back whole from each of its N replicas
    assert report["hints_held"] >= 1 and report["hints_handed_off"] >= report["hints_held"]
    # Each of the 4 values written while the node was down (it is a replica of each) is on it after
    # the repair, whether the call or background anti-entropy moved it.
    assert report["big_values_repaired"] == 4
    assert report["false_downs"] == []  # gossip kept flowing: no live node seen down by a live peer
    for phase in ("baseline", "write", "hinted", "repaired"):
        small = report["small"][phase]
        assert small["count"] > 0 and small["p99_ms"] is not None, (phase, small)
    # Every node it started is gone, the one it stopped and started again too (it has a new pid).
    assert _bench_nodes() == [], "bench big left node processes running"


def _bench_nodes() -> list[str]:
    """Command lines of running node processes of a `bench big` cluster."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if b"bhandar-bench-big-" in cmdline and b"cmd.node" in cmdline:
                found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found
