"""Pieces without a cluster: the cluster file, request checks, pid checks."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bhandar_cli.core.protocol.client_messages import GetRequest, PutRequest
from bhandar_cli.core.protocol.messages import Ping
from bhandar_cli.fleet import cluster_file
from bhandar_cli.fleet.cluster_file import ClusterFile, ClusterFileError, NodeEntry
from bhandar_cli.fleet.pids import pid_alive
from bhandar_cli.fleet.placement import free_ports
from bhandar_cli.fleet.supervisor import plan
from bhandar_cli.node.rpc_service import check_request
from tests.e2e.conftest import wait_for


def test_cluster_file_round_trip_and_errors(tmp_path: Path) -> None:
    cluster = plan(tmp_path, 4, 2, 0, 8, 3)
    assert [n.zone for n in cluster.nodes] == ["z1", "z2", "z1", "z2"]
    ports = [p for n in cluster.nodes for p in (n.port, n.http_port)]
    assert len(set(ports)) == 8
    cluster_file.save(cluster)
    assert cluster_file.load(tmp_path) == cluster
    assert cluster.node("b").id == "B"
    with pytest.raises(ClusterFileError, match="unknown node"):
        cluster.node("Q")
    with pytest.raises(ClusterFileError, match="cluster up"):
        cluster_file.load(tmp_path / "nowhere")
    (tmp_path / "cluster.json").write_text('{"format": 99, "nodes": []}')
    with pytest.raises(ClusterFileError, match="malformed"):
        cluster_file.load(tmp_path)
    planned = plan(tmp_path, 2, 1, 20000, 8, 1)
    assert [(n.port, n.http_port) for n in planned.nodes] == [(20000, 20001), (20002, 20003)]


def test_resolve_dir_prefers_option_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BHANDAR_CLUSTER", "/from/env")
    assert cluster_file.resolve_dir("given") == Path("given")
    assert cluster_file.resolve_dir(None) == Path("/from/env")
    monkeypatch.delenv("BHANDAR_CLUSTER")
    assert cluster_file.resolve_dir(None) == Path(".bhandar")


def test_check_request_refuses_wrong_types() -> None:
    assert check_request(GetRequest(1, "kv", "k"))
    bad_requests: list[Callable[[], object]] = [
        lambda: GetRequest(1, "kv", 5),  # type: ignore[arg-type]
        lambda: PutRequest(1, "kv", "k", "text", "x", None),  # type: ignore[arg-type]
        lambda: PutRequest(1, "kv", "k", b"v", "x", {"A": "1"}),  # type: ignore[dict-item]
        lambda: Ping(1),
    ]
    for bad in bad_requests:
        # Compiled (bhandar_cli/native.py), a field of the wrong type is refused as the message
        # is built (TypeError, which from_wire reports as a ValueError); as Python, here.
        with pytest.raises((ValueError, TypeError)):
            check_request(bad())
    # A bool is not a request id: refused as Python; compiled, the int field holds True as 1.
    flag = GetRequest(True, "kv", "k")
    if flag.rid is True:
        with pytest.raises(ValueError):
            check_request(flag)
    else:
        assert flag.rid == 1 and type(flag.rid) is int and check_request(flag)


def test_pid_checks_and_free_ports() -> None:
    assert not pid_alive(0)
    other = subprocess.Popen(["sleep", "30"])
    try:
        # Until the child has exec'd `sleep`, its command line can read empty, which pid_alive
        # (rightly) takes for a node on its way out: ask once it is what it will stay.
        cmdline = Path(f"/proc/{other.pid}/cmdline")
        wait_for(lambda: cmdline.read_bytes().startswith(b"sleep"), 10, "the child to exec sleep")
        assert not pid_alive(other.pid)  # alive, but not a node of ours
    finally:
        other.kill()
        other.wait()
    ports = free_ports(20)
    assert len(set(ports)) == 20


def test_node_entry_address() -> None:
    entry = NodeEntry("A", "z1", "127.0.0.1", 5, 6, "d", "l")
    assert entry.address == "127.0.0.1:5"
    assert ClusterFile("x", (entry,)).names == ["A"]
