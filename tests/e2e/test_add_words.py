"""`bhandar cluster add` counts what happened in the words the REPL's `add` uses (issue 41, item
11: it said "45 keys streamed" of a node that then held 15): the keys the new node holds, as
`cluster status` shows them, and the records streamed to it (each key's copy from each of its
replicas, so more). A real 3-node process small_cluster."""

from __future__ import annotations

import json
import re

from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import run_cli


def test_cluster_add_says_how_many_records_the_new_node_received(small_cluster: ClusterFile) -> None:
    lines = "".join(f"put kv words:{i} {i}\n" for i in range(30)).encode()
    written = run_cli("pipe", "--cluster", small_cluster.dir, stdin=lines)
    assert written.returncode == 0, written.stderr
    added = run_cli("cluster", "add", "--zone", "z1", "--cluster", small_cluster.dir, timeout=120)
    assert added.returncode == 0, added.stderr
    said = re.fullmatch(
        r"added D \(zone z1\): holds (\d+) keys, from (\d+) records streamed from their replicas in [\d.]+ s",
        added.stdout.decode().strip(),
    )
    assert said is not None, added.stdout
    status = run_cli("cluster", "status", "-o", "json", "--cluster", small_cluster.dir)
    held = {n["id"]: n.get("keys") for n in json.loads(status.stdout)["nodes"]}
    keys, records = int(said.group(1)), int(said.group(2))
    assert 0 < keys == held["D"] <= records, (said.group(0), held)
