"""`bhandar cluster ...` end to end, and the REPL on a process cluster (`repl --connect`)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from bhandar_cli.fleet import cluster_file, pids
from bhandar_cli.fleet.cluster_file import ClusterFile
from bhandar_cli.repl.batch import open_tcp_session
from tests.e2e.conftest import NODE_ARGS, kill_all, rpc, run_cli, wait_for


def js(*args: str) -> dict[str, Any]:
    proc = run_cli(*args, "-o", "json")
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


@pytest.fixture
def cli_dir(tmp_path: Path) -> Iterator[str]:
    directory = tmp_path / "c"
    try:
        yield str(directory)
    finally:
        kill_all(directory)


def test_cluster_lifecycle_through_the_cli(cli_dir: str) -> None:
    node_args = [a for arg in NODE_ARGS for a in ("--node-arg", arg)]
    up = js("cluster", "up", "--nodes", "3", "--zones", "3", "--dir", cli_dir, *node_args)
    assert [n["id"] for n in up["nodes"]] == ["A", "B", "C"]
    assert all(pids.pid_alive(n["pid"]) for n in up["nodes"])
    again = run_cli("cluster", "up", "--dir", cli_dir)
    assert again.returncode == 1 and b"already running" in again.stderr

    pid_b = up["nodes"][1]["pid"]
    assert js("cluster", "kill", "B", "--dir", cli_dir)["changed"] is True
    wait_for(lambda: not pids.pid_alive(pid_b), 5, "B to die")
    status = js("cluster", "status", "--dir", cli_dir)
    assert [n["up"] for n in status["nodes"]] == [True, False, True]
    assert js("put", "kv", "k", "1", "--cluster", cli_dir)["ok"]  # A and C still make a quorum

    # Another process holds B's port: the start fails saying so, and status says why B is down.
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", up["nodes"][1]["port"]))
        squatter.listen()
        refused = run_cli("cluster", "start", "B", "--dir", cli_dir)
        said = refused.stderr.decode()
        assert refused.returncode == 1 and "another process listens on its port" in said, said
        assert said.count("\n") == 1, said  # one line: what B said as it stopped, not its log's tail
        down_b = js("cluster", "status", "--dir", cli_dir)["nodes"][1]
        assert not down_b["up"] and "another process listens on its port" in down_b["crashed"], down_b

    started = js("cluster", "start", "B", "--dir", cli_dir)
    assert started["changed"] is True and started["cmd"] == "start"
    entry = cluster_file.load(cli_dir).node("B")
    assert entry.pid != pid_b and entry.port == up["nodes"][1]["port"]  # same ports, new process

    groups = js("cluster", "partition", "A", "|", "B", "--dir", cli_dir)["groups"]
    assert groups == [["A"], ["B"], ["C"]]
    cluster = cluster_file.load(cli_dir)
    assert sorted(rpc(cluster, "A", "info")["partitions"][0]) == ["A"]
    assert js("cluster", "status", "--dir", cli_dir)["partitions"] == groups
    js("cluster", "heal", "--dir", cli_dir)
    assert rpc(cluster, "B", "info")["partitions"] == []
    assert js("cluster", "delay", "C", "25", "--dir", cli_dir)["ms"] == 25
    assert rpc(cluster, "A", "info")["delays"] == {"C": 25.0}
    assert run_cli("cluster", "delay", "Q", "5", "--dir", cli_dir).returncode == 1

    down = js("cluster", "down", "--dir", cli_dir)
    assert down["nodes"] == {"A": "stopped", "B": "stopped", "C": "stopped"}
    assert all(n.pid == 0 for n in cluster_file.load(cli_dir).nodes)
    after = run_cli("cluster", "status", "--dir", cli_dir)
    assert after.returncode == 1 and b"stale" in after.stderr
    # The same directory comes up again with the data the nodes kept.
    js("cluster", "up", "--nodes", "3", "--zones", "3", "--dir", cli_dir, *node_args)
    # The first ALL read after a restart also dials every peer (TLS); on a loaded machine that can
    # outlast one request timeout, so wait for it with a deadline instead of asking once.
    got: dict[str, Any] = {}

    def read_all() -> bool:
        proc = run_cli("get", "kv", "k", "--cluster", cli_dir, "-c", "ALL", "-o", "json")
        if proc.returncode == 0:
            got.update(json.loads(proc.stdout))
        return proc.returncode == 0

    wait_for(read_all, 20, "a read at ALL after the restart")
    assert got["values"] == [1]


def test_usage_errors_exit_2(cli_dir: str) -> None:
    assert run_cli("cluster", "up", "--nodes", "0", "--dir", cli_dir).returncode == 2
    assert run_cli("cluster", "up", "--zones", "9", "--nodes", "3", "--dir", cli_dir).returncode == 2
    assert run_cli("cluster", "partition", "|", "--dir", cli_dir).returncode == 2


def test_repl_session_on_a_process_cluster(fresh_cluster: ClusterFile) -> None:
    async def main() -> list[dict[str, Any]]:
        replies: list[dict[str, Any]] = []
        async with open_tcp_session(fresh_cluster.dir, "json") as session:
            for line in [
                "keyspace create votes policy=counter",
                "put kv a 1; get kv a",
                "incr votes x 5; get votes x",
                "status",
                "clock kv a",
                "prefs kv a",
                "metrics",
                "kill E",
                "status",
                "revive E",
                "partition A | B",
                "heal",
                "delay B 1",
                "delay B 0",
                "get kv a c=ALL",
                "wait converged timeout=20s",
            ]:
                replies.extend(r.to_json() for r in await session.run_line(line))
        return replies

    replies = trio.run(main)
    by_cmd: dict[str, list[dict[str, Any]]] = {}
    for reply in replies:
        assert reply.get("ok") is not False, reply
        by_cmd.setdefault(reply["cmd"], []).append(reply)
    assert by_cmd["get"][0]["values"] == [1] and by_cmd["get"][1]["values"] == [5]
    assert [n["up"] for n in by_cmd["status"][1]["nodes"]] == [True, True, True, True, False]
    assert by_cmd["revive"][0]["changed"] is True
    assert by_cmd["partition"][0]["groups"] == [["A"], ["B"], ["C", "D", "E"]]
    assert by_cmd["metrics"][0]["ops"]["put"]["QUORUM"]["ok"] >= 1
    assert set(by_cmd["clock"][0]["replicas"]) >= set(by_cmd["prefs"][0]["replicas"])
    assert by_cmd["wait"][0]["ok"] is True


def test_repl_over_processes_repairs_snapshots_and_restores(fresh_cluster: ClusterFile) -> None:
    async def main() -> list[dict[str, Any]]:
        async with open_tcp_session(fresh_cluster.dir, "json") as session:
            replies: list[dict[str, Any]] = []
            for line in [
                "put kv before 0",
                "members from=A",
                "repair A",
                "merkle A B",
                "flush",
                "snapshot s1",
                "put kv after 1",
                "sleep 1s",
                "restore s1",
                "get kv after c=ALL",
                "get kv before c=ALL",
            ]:
                replies.extend(r.to_json() for r in await session.run_line(line))
            return replies

    replies = trio.run(main)
    assert [r["ok"] for r in replies] == [True] * len(replies), [r for r in replies if not r["ok"]]
    members = replies[1]["members"]
    assert {m["id"] for m in members} == set(fresh_cluster.names) and all(m["up"] for m in members)
    assert replies[2]["nodes"][0]["compared"] > 0 and replies[3]["differing"] == 0
    assert replies[8]["nodes"] == sorted(fresh_cluster.names)
    assert replies[9]["found"] is False  # written after the snapshot: a restore rolls it back
    assert replies[10]["values"] == [0]
