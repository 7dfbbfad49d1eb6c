"""The upgrade's faces on a process cluster: `cluster upgrade` refuses a step that would leave two
replicas of a key down, `repl --connect DIR -e 'upgrade to=2'` moves a version-1 cluster to 2 with
its progress on stderr, and status and members show each node's protocol."""

from __future__ import annotations

import json
import re
from typing import Any

from bhandar_cli.fleet import cluster_file
from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import run_cli


def status(cluster: ClusterFile) -> dict[str, Any]:
    proc = run_cli("cluster", "status", "--dir", cluster.dir, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_upgrade_refuses_with_a_node_down_then_moves_the_cluster_to_2(fresh_cluster_v1: ClusterFile) -> None:
    cluster = fresh_cluster_v1
    assert {n["id"]: n["protocol"] for n in status(cluster)["nodes"]} == dict.fromkeys(cluster.names, 1)

    assert run_cli("cluster", "kill", "D", "--dir", cluster.dir).returncode == 0
    refused = run_cli("cluster", "upgrade", "--to", "2", "--dir", cluster.dir)
    assert refused.returncode == 1
    said = refused.stderr.decode()
    found = re.search(r"upgrade stopped before ([A-E]): D is down \(seen by this client[,)]", said)
    assert found and "two replicas of those keys down" in said, said
    # The node it stopped before, and D, were never touched; nodes that share no key with D may
    # have been upgraded before it.
    after = {n.id: n.protocol for n in cluster_file.load(cluster.dir).nodes}
    assert after[found.group(1)] == 1 and after["D"] == 1, after
    assert run_cli("cluster", "start", "D", "--dir", cluster.dir).returncode == 0

    proc = run_cli("repl", "--connect", cluster.dir, "-o", "json", "-e", "upgrade to=2; members")
    assert proc.returncode == 0, proc.stderr
    upgrade, members = (json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip())
    assert [r["node"] for r in upgrade["nodes"]] == cluster.names
    assert all(r["settled"] and r["protocol"] == 2 for r in upgrade["nodes"]), upgrade
    # What the refused run upgraded is skipped; the rest moves from 1.
    assert all(bool(r.get("skipped")) == (r["from"] == 2) for r in upgrade["nodes"]), upgrade
    moved = [r["node"] for r in upgrade["nodes"] if not r.get("skipped")]
    assert found.group(1) in moved and "D" in moved
    progress = proc.stderr.decode()
    for phase in ("check", "stop", "down", "start", "rejoin", "hints", "serve", "done"):
        assert f"upgrade: D {phase} (" in progress, progress

    assert {n["protocol"] for n in status(cluster)["nodes"]} == {2}
    rows = members["members"]
    assert {m["protocol"] for m in rows} == {2}, rows
    # Version 2's round trip, measured by gossip, for the peers it has acked lately.
    assert any(m["rtt_ms"] is not None and m["rtt_ms"] >= 0 for m in rows), rows
