"""Encryption at rest on process clusters: `cluster up` encrypts by default (no plaintext of a
value anywhere under the data directories, in the WAL before a flush or in the SSTables after),
`--no-encrypt` keeps them plain (where the same search finds the value: the search can fail), and
a node started without its data key, or with another one, refuses to start in one clear line."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from bhandar_cli.client.openers import open_tcp_client
from bhandar_cli.core.model.values import encode_json
from bhandar_cli.fleet import cluster_file, supervisor
from bhandar_cli.security.data_key import ENV_VAR, key_path
from tests.e2e.conftest import NODE_ARGS, REPO, kill_all

VALUE = "secret-value-4c9b1e77-do-not-leak"
NODE_A = ("--id", "A", "--http-port", "-1")


def _files_holding(cluster_dir: Path, needle: bytes) -> list[str]:
    """Every file under the nodes' data directories whose bytes contain `needle`."""
    found = []
    for root, _, names in os.walk(cluster_dir / supervisor.DATA_DIR):
        for name in names:
            path = Path(root) / name
            if needle in path.read_bytes():
                found.append(str(path))
    return found


def _up_write_and_look(directory: Path, encrypt: bool) -> tuple[list[str], list[str], int]:
    """A 3-node cluster; VALUE written at ALL; the files holding it before and after a flush of
    every node, and the SSTables there are then."""

    async def main() -> tuple[list[str], list[str], int]:
        await supervisor.up(directory, 3, 3, 0, 8, 3, NODE_ARGS, 30.0, encrypt=encrypt)
        async with open_tcp_client(directory) as client:
            for i in range(20):
                await client.data.put("kv", f"k{i}", encode_json(VALUE), "application/json", "none", "ALL")
            before = _files_holding(directory, VALUE.encode())
            for node in ("A", "B", "C"):
                await client.admin.on_nodes("flush", node)
            after = _files_holding(directory, VALUE.encode())
            tables = len(list((directory / supervisor.DATA_DIR).rglob("*.sst")))
            got = await client.data.get("kv", "k7", "QUORUM")
            assert VALUE in repr(got)  # what the disk hides, the cluster still serves
        return before, after, tables

    return trio.run(main)


def _node_run(data_dir: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "bhandar_cli.cli.node_cmd", "run", *NODE_A, "--data-dir", data_dir],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )


def test_an_encrypted_cluster_keeps_no_plaintext_and_a_node_without_its_key_refuses(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    try:
        before, after, tables = _up_write_and_look(directory, encrypt=True)
        cluster = cluster_file.load(directory)
        assert cluster.encrypt and cluster_file.path_of(directory).read_text().count('"encrypt": true')
        key = key_path(directory)
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
        assert before == [] and tables > 0 and after == []

        async def stop_a() -> Any:
            async with open_tcp_client(directory) as client:
                return await client.admin.kill("A")

        assert trio.run(stop_a)["changed"]
        env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
        data_dir = cluster.node("A").data_dir
        refused = _node_run(data_dir, env)
        assert refused.returncode != 0
        lines = [line for line in refused.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, refused.stderr
        assert "could not start" in lines[0] and "encrypted" in lines[0] and "--data-key-file" in lines[0]
        env[ENV_VAR] = base64.b64encode(b"\x01" * 32).decode()
        wrong = _node_run(data_dir, env)
        assert wrong.returncode != 0 and "not with the key given" in wrong.stderr, wrong.stderr
        assert "Traceback" not in refused.stderr + wrong.stderr
    finally:
        kill_all(directory)


def test_no_encrypt_gives_a_plain_cluster(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    try:
        before, after, tables = _up_write_and_look(directory, encrypt=False)
        assert not cluster_file.load(directory).encrypt and not key_path(directory).exists()
        assert any(p.endswith(".log") for p in before)  # the same search finds a plain value
        assert tables > 0 and any(p.endswith(".sst") for p in after)
    finally:
        kill_all(directory)
