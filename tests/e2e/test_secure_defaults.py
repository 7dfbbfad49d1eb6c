"""A process cluster is secure by default: owner-only files, TLS everywhere, plain TCP only on
loopback and only when asked for."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import httpx
import pytest

from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import http_base, kill_all, rpc, run_cli


def test_everything_a_cluster_writes_is_its_owners_only(shared_cluster: ClusterFile) -> None:
    where = ("--cluster", shared_cluster.dir)
    for i in range(20):
        assert run_cli("put", "kv", f"perm-{i}", str(i), *where).returncode == 0
    for node in shared_cluster.names:
        rpc(shared_cluster, node, "flush")
    root = Path(shared_cluster.dir)
    kinds: set[str] = set()
    wrong: list[str] = []
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        want = 0o700 if path.is_dir() else 0o600
        if mode != want:
            wrong.append(f"{path.relative_to(root)} {mode:o}")
        kinds.add(path.suffix or path.name)
    assert not wrong, wrong
    # The walk saw every kind of file there is to see: keys, certificates, the cluster file, logs,
    # WAL segments, tables and manifests.
    assert {".key", ".crt", ".json", ".log", ".sst", "MANIFEST"} <= kinds, kinds


def test_the_http_api_speaks_only_https(shared_cluster: ClusterFile) -> None:
    entry = shared_cluster.node("A")
    assert http_base(shared_cluster, "A").startswith("https://")
    # Plain HTTP is not served: it is told, in one line, to use https.
    plain = httpx.get(f"http://{entry.host}:{entry.http_port}/v1/keyspaces", timeout=5)
    assert plain.status_code == 400 and "use https://" in plain.text
    with pytest.raises(httpx.HTTPError):  # a certificate this client does not trust
        httpx.get(f"{http_base(shared_cluster, 'A')}/v1/keyspaces", timeout=5)


@pytest.mark.parametrize("host", ["0.0.0.0", "localhost.invalid"])
def test_a_node_without_tls_refuses_a_non_loopback_address(tmp_path: Path, host: str) -> None:
    data = tmp_path / "data"
    proc = run_cli("node", "run", "--id", "Z", "--host", host, "--data-dir", str(data))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and f"refusing to listen on {host} without TLS" in lines[0]
    assert not data.exists()  # refused before creating anything


def test_insecure_is_plain_tcp_on_request(tmp_path: Path) -> None:
    directory = tmp_path / "plain"
    try:
        up = run_cli(
            "cluster",
            "up",
            "--insecure",
            "-n",
            "1",
            "--zones",
            "1",
            "--replicas",
            "1",
            "--dir",
            str(directory),
            "-o",
            "json",
        )
        assert up.returncode == 0, up.stderr
        assert json.loads(up.stdout)["tls"] is False
        assert not (directory / "tls").exists()
        assert run_cli("put", "kv", "k", "1", "-c", "ONE", "--cluster", str(directory)).returncode == 0
        got = run_cli("get", "kv", "k", "-c", "ONE", "-o", "json", "--cluster", str(directory))
        assert json.loads(got.stdout)["values"] == [1]
        assert stat.S_IMODE(os.stat(directory / "cluster.json").st_mode) == 0o600
    finally:
        kill_all(directory)


def test_cluster_up_refuses_a_directory_holding_other_nodes(tmp_path: Path) -> None:
    # The data of a three-node cluster (as `cluster up --nodes 3` leaves it after `cluster down`).
    for node in "ABC":
        (tmp_path / "data" / node).mkdir(parents=True)
        (tmp_path / "data" / node / "MANIFEST").write_bytes(b"")
    (tmp_path / "data" / "D.left").mkdir()  # a node that was decommissioned: not a member
    done = run_cli("cluster", "up", "--dir", str(tmp_path), "--nodes", "2", "--zones", "2", "--replicas", "2")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.decode().splitlines()
    assert "holds the data of 3 nodes (A, B, C); --nodes 2 would leave C in the ring" in line
    assert not (tmp_path / "cluster.json").exists() and not list(tmp_path.glob("*.log"))  # nothing started
