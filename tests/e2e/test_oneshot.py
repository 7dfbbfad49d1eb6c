"""The lean one-shot path: what a `get` imports, that it answers as the typer command does, and
`bench cli`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from bhandar_cli.cli.app import app
from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import REPO, run_cli

# Packages a one-shot get does without: the test tools (pulled in once through trio.testing), the
# REPL's prompt, trio, typer (and the click and pydantic it brings), rich (tables only),
# cryptography (ssl checks the certificate alone), the node-to-node message modules and
# core/protocol/messages.py itself (the client's messages are core/protocol/client_messages.py), the
# cluster views and operations of the full client (client/client.py, client/cluster_views.py,
# client/cluster_admin.py), security/pki.py (the client's check of a node is security/ca_trust.py) and what it
# and fleet/pids.py need only to make certificates or start processes (datetime, hashlib, subprocess), and
# the idna codec (ASCII host names and node ids are passed as bytes).
FORBIDDEN = re.compile(
    r"^(pytest|_pytest|trio|typer|click|pydantic|prompt_toolkit|rich|cryptography)(\.|$)"
    r"|^(datetime|hashlib|subprocess|encodings\.idna|stringprep|unicodedata)$"
    r"|^bhandar_cli\.(repl|sim|storage|store|host|node\.(net\.(rpc|frames)|runtime))(\.|$)"
    r"|^bhandar_cli\.(fleet\.supervisor|security\.pki|client\.backends\.tcp_backend)$"
    r"|^bhandar_cli\.client\.(client|cluster_views|cluster_admin)$"
    r"|^bhandar_cli\.core\.(repair\.(antientropy|hash_index)|membership\.gossip|roles\.(streaming|coordinator))$"
    r"|^bhandar_cli\.core\.(node|model\.store|protocol\.messages|model\.keyspaces|membership\.members)$"
)


def imported(stderr: bytes) -> list[str]:
    """The modules `python -X importtime` reports, in import order."""
    names = []
    for line in stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.append(name)
    return names


def test_a_oneshot_get_imports_neither_trio_nor_typer_nor_test_tools(shared_cluster: ClusterFile) -> None:
    where = ("--cluster", shared_cluster.dir)
    assert run_cli("put", "kv", "lean", '"x"', *where, "-o", "json").returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "BHANDAR_CLUSTER"}
    argv = [sys.executable, "-P", "-X", "importtime", "-m", "bhandar_cli", "get", "kv", "lean", *where]
    proc = subprocess.run([*argv, "-o", "json"], capture_output=True, cwd=REPO, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert json.loads(proc.stdout)["values"] == ["x"]
    modules = imported(proc.stderr)
    assert "bhandar_cli.client.backends.blocking_backend" in modules  # the check below looks at a real run
    assert [m for m in modules if FORBIDDEN.search(m)] == []


def test_the_lean_path_answers_as_the_typer_command_does(shared_cluster: ClusterFile) -> None:
    where = ["--cluster", shared_cluster.dir]
    assert run_cli("put", "kv", "same", '{"a": 1}', *where).returncode == 0
    lean = run_cli("get", "kv", "same", *where, "-o", "json", "-c", "ALL")
    typer_face = CliRunner().invoke(app, ["get", "kv", "same", *where, "-o", "json", "-c", "ALL"])
    assert lean.returncode == typer_face.exit_code == 0
    lean_json, typer_json = json.loads(lean.stdout), json.loads(typer_face.stdout)
    for answer in (lean_json, typer_json):
        answer.pop("coordinator"), answer.pop("replies")  # either replica may coordinate
    assert lean_json == typer_json and lean_json["values"] == [{"a": 1}]
    missing = run_cli("get", "kv", "never-written", *where, "-o", "raw")
    assert missing.returncode == 3 and missing.stdout == b"" and b"not found" in missing.stderr


def test_bench_cli_prints_well_formed_json(shared_cluster: ClusterFile) -> None:
    proc = run_cli("bench", "cli", "--cluster", shared_cluster.dir, "--runs", "3", "-o", "json")
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert report["cmd"] == "bench cli" and report["ok"] is True and report["errors"] == 0
    assert report["runs"] == 3 and report["nodes"] == len(shared_cluster.nodes)
    assert report["baseline"] == "python -c pass"
    assert isinstance(report["bytecode_cached"], bool)
    for op in ("get", "put"):
        figures = report["per_op"][op]
        assert set(figures) == {"median_ms", "p90_ms", "min_ms"}
        assert all(isinstance(v, float) and v > 0 for v in figures.values())
        assert figures["min_ms"] <= figures["median_ms"] <= figures["p90_ms"]
        assert report["over_baseline_ms"][op] == round(figures["median_ms"] - report["baseline_median_ms"], 1)
        # CPU time: more than nothing (an interpreter starts), and no process used more than its
        # wall time on every core, so neither does the median
        assert 0 < report["cpu_median_ms"][op] <= figures["median_ms"] * (os.cpu_count() or 1)
    assert report["baseline_cpu_median_ms"] > 0


def test_bench_cli_without_a_cluster_says_so(tmp_path: object) -> None:
    proc = run_cli("bench", "cli", "--cluster", str(tmp_path), "--runs", "1", "-o", "json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["code"] == "no_cluster"


def test_a_oneshot_put_via_a_non_replica_says_who_coordinated(shared_cluster: ClusterFile) -> None:
    where = ("--cluster", shared_cluster.dir)
    for node in shared_cluster.names:  # the first node that forwards: not a replica of the key
        proc = run_cli("put", "kv", "via-note", "1", "--via", node, *where, "-o", "json")
        assert proc.returncode == 0, proc.stderr.decode()
        reply = json.loads(proc.stdout)
        if reply["coordinator"] != node:
            assert reply["forwarded_by"] == node
            # The node's own reason, over the wire (protocol 6), with no round trip of the client's.
            assert reply["note"].startswith(f"{node} is not a replica of kv/via-note (")
            assert f"it forwarded to {reply['coordinator']}" in reply["note"]
            text = run_cli("put", "kv", "via-note", "2", "--via", node, *where).stdout.decode()
            assert f"forwarded to {reply['coordinator']}" in text
            return
        assert "forwarded_by" not in reply
    raise AssertionError("every node coordinated itself: with 3 replicas of 5 nodes two should forward")


def test_bench_cli_tells_whether_the_bytecode_it_measures_is_cached(monkeypatch: Any, tmp_path: Path) -> None:
    import importlib.util

    from bhandar_cli.cli import bench_cli_cmd

    fresh = tmp_path / "fresh.pyc"
    fresh.write_bytes(b"")  # newer than any source of the tree
    monkeypatch.setattr(importlib.util, "cache_from_source", lambda source: str(fresh))
    assert bench_cli_cmd.bytecode_cached() is True
    monkeypatch.setattr(importlib.util, "cache_from_source", lambda source: str(tmp_path / "none.pyc"))
    assert bench_cli_cmd.bytecode_cached() is False
