"""`bhandar cluster add` and `bhandar soak` on process clusters.

A node added to a running cluster becomes a normal member that every node sees and holds the data
of its ranges; a bad name or zone is one clear line. A short soak (crashes, a partition, a join and
a decommission under load) ends with nothing lost and every replica the same; and the soak's check
is not a formality: an acknowledged write or increment the cluster never got is reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from random import Random
from typing import Any

import trio

from bhandar_cli.client.openers import open_tcp_client
from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.values import encode_json
from bhandar_cli.fleet import cluster_file
from bhandar_cli.fleet.cluster_file import ClusterFile
from bhandar_cli.security import pki
from bhandar_cli.sim.checker.check import check_history
from bhandar_cli.sim.history import History
from bhandar_cli.soak.load import TALLY, VERSIONED, LoadStats, SoakClient
from bhandar_cli.soak.run import collect, heal_and_converge, prepare_keyspaces
from tests.e2e.conftest import REPO, rpc

CLI = Callable[..., subprocess.CompletedProcess[bytes]]


def test_an_added_node_becomes_a_member_and_gets_its_data(fresh_cluster: ClusterFile, bhandar: CLI) -> None:
    directory = fresh_cluster.dir
    keys = [f"g{i}" for i in range(60)]

    async def write() -> None:
        async with open_tcp_client(directory) as client:
            for key in keys:
                await client.data.put("kv", key, encode_json(key), "application/json", "none", "ALL")

    trio.run(write)
    done = bhandar("cluster", "add", "--dir", directory, "--zone", "z2", "-o", "json")
    assert done.returncode == 0, done.stderr.decode()
    added = json.loads(done.stdout)
    assert (added["node"], added["zone"]) == ("F", "z2")  # the next free name
    grown = cluster_file.load(directory)
    assert grown.names == ["A", "B", "C", "D", "E", "F"]
    # A secure cluster's new node got its own certificate from the cluster CA, key owner-only.
    key = Path(grown.node("F").data_dir) / pki.TLS_DIR / pki.NODE_KEY
    assert grown.tls and key.stat().st_mode & 0o777 == 0o600
    for name in grown.names:  # every node sees F in service
        members = {m["id"]: m["status"] for m in rpc(grown, name, "members")}
        assert members.get("F") == "normal", (name, members)
    # F holds what it is a replica of (streamed when it joined), without any read repairing it.
    ring = trio.run(_ring_of, directory)
    mine = [k for k in keys if "F" in ring.preference_list(key_token("kv", k), 3)]
    assert mine, "F should own some of 60 keys"
    missing = [k for k in mine if rpc(grown, "F", "records", keyspace="kv", key=k)["own"] is None]
    assert not missing, f"F lacks {len(missing)} of its {len(mine)} keys: {missing[:5]}"

    taken = bhandar("cluster", "add", "B", "--dir", directory)
    assert taken.returncode == 1 and taken.stderr.decode().strip() == "bhandar: node B already exists"
    bad_zone = bhandar("cluster", "add", "G", "--zone", "a b", "--dir", directory)
    assert bad_zone.returncode == 1 and "bad zone name 'a b'" in bad_zone.stderr.decode()
    assert cluster_file.load(directory).names == grown.names  # neither attempt started anything


async def _ring_of(directory: str) -> Any:
    async with open_tcp_client(directory) as client:
        return client.backend.ring


def test_a_short_soak_loses_nothing(fresh_cluster: ClusterFile) -> None:
    command = [sys.executable, "-P", "-m", "bhandar_cli", "soak", "--seconds", "24", "--seed", "3"]
    done = subprocess.run(
        [*command, "--cluster", fresh_cluster.dir, "-o", "json"],
        capture_output=True,
        cwd=REPO,
        timeout=300,
    )
    summary = json.loads(done.stdout)
    assert done.returncode == 0 and summary["ok"], summary
    assert summary["faults"]["join"] == 1 and summary["faults"]["decommission"] == 1, summary["faults"]
    assert summary["faults"].get("kill", 0) + summary["faults"].get("partition", 0) >= 1, summary["faults"]
    assert summary["fault_errors"] == [] and summary["lost_writes"] == [] and summary["converged"]
    acked = sum(c["acknowledged"] for c in summary["operations"]["by_kind"].values())
    assert acked >= 300 and summary["checked"]["acknowledged_writes"] > 0, summary["operations"]
    # The cluster grew by one and lost one of the original five.
    after = cluster_file.load(fresh_cluster.dir)
    assert len(after.names) == 5 and "F" in after.names


def test_the_soak_check_reports_writes_the_cluster_never_got(shared_cluster: ClusterFile) -> None:
    async def main() -> tuple[Any, Any]:
        async with open_tcp_client(shared_cluster.dir) as client:
            keyspaces = await prepare_keyspaces(client)
            history = History()
            soaker = SoakClient(0, client.backend, history, LoadStats(), Random(7), keys=5)
            for _ in range(120):
                await soaker.step()
            assert history.ops and all(op.ok for op in history.ops)

            async def verdict() -> Any:
                assert (await heal_and_converge(client, 60)).converged
                held = await collect(client.backend, history, keyspaces)
                assert not held.unreadable
                return check_history(history, keyspaces, held.final, held.replicas, held.hints_left)

            honest = await verdict()
            # Plant: an acknowledged put of a value nobody stored, an acknowledged +1000 nobody sent.
            now = trio.current_time()
            put = history.invoke(now, 9, "put", VERSIONED.name, "k0", "QUORUM", b'"never stored"')
            incr = history.invoke(now, 9, "incr", TALLY.name, "k0", "QUORUM", request_id="x", delta=1000)
            for op in (put, incr):
                op.outcome, op.completed = "ok", now
            return honest, await verdict()

    honest, planted = trio.run(main)
    assert honest.passed, honest.violations
    kinds = sorted(v.kind for v in planted.violations)
    assert kinds == ["counter", "lost_write"], planted.violations
    assert any("never stored" in str(v) for v in planted.violations)
