"""Staged configuration on a process cluster: `bhandar config set` with a value that makes every
request fail stops at the first node and rolls it back; a good value reaches every node, the
cluster file keeps it and a restarted node comes back with it."""

from __future__ import annotations

import json
from typing import Any

from bhandar_cli.fleet import cluster_file
from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import run_cli


def show(cluster: ClusterFile) -> dict[str, Any]:
    proc = run_cli("config", "show", "--cluster", cluster.dir, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_a_bad_value_is_rolled_back_and_a_good_one_reaches_every_node(small_cluster: ClusterFile) -> None:
    cluster = small_cluster
    assert show(cluster)["version"] == 0

    # A timeout shorter than any round trip between two processes: every QUORUM read through the
    # node fails once it takes the value.
    bad = run_cli("config", "set", "request_timeout", "0.0001", "--window", "1", "--cluster", cluster.dir)
    said = bad.stderr.decode()
    assert bad.returncode == 1, said
    assert "stopped at A and rolled it back to version 0" in said and "probes failed" in said, said
    assert "config: A apply" in said and "config: A recovered" in said and "errors=0" in said, said
    assert "config: B apply" not in said and "config: C apply" not in said, said
    after_bad = show(cluster)
    assert after_bad["agreed"] and after_bad["version"] == 0
    assert all(r["values"]["request_timeout"] == 1.0 for r in after_bad["nodes"])
    assert cluster_file.load(cluster.dir).config == {}

    good = run_cli(
        "config", "set", "phi_threshold", "12", "--window", "1", "--cluster", cluster.dir, "-o", "json"
    )
    assert good.returncode == 0, good.stderr
    report = json.loads(good.stdout)
    assert report["version"] == 1 and [r["node"] for r in report["nodes"]] == ["A", "B", "C"]
    shown = show(cluster)
    assert shown["agreed"] and shown["version"] == 1 and shown["set"] == {"phi_threshold": 12.0}
    assert cluster_file.load(cluster.dir).config == {"version": 1, "values": {"phi_threshold": 12.0}}

    # A node restarted later comes back with the cluster file's version.
    assert run_cli("cluster", "kill", "B", "--dir", cluster.dir).returncode == 0
    assert run_cli("cluster", "start", "B", "--dir", cluster.dir).returncode == 0
    rows = {r["node"]: r for r in show(cluster)["nodes"]}
    assert rows["B"]["version"] == 1 and rows["B"]["values"]["phi_threshold"] == 12.0
    status = run_cli("cluster", "status", "--dir", cluster.dir, "-o", "json")
    assert {n["id"]: n["config"] for n in json.loads(status.stdout)["nodes"]} == dict.fromkeys("ABC", 1)
