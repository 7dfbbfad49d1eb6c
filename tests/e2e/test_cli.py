"""The command line on a process cluster: data commands, -o raw in pipelines, JSON, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bhandar_cli.fleet import cluster_file
from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import REPO, run_cli


def out_json(proc: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1, f"expected one JSON object, got {proc.stdout!r} (stderr {proc.stderr!r})"
    return json.loads(lines[0])  # type: ignore[no-any-return]


def test_status_json_lists_every_node_with_its_process(shared_cluster: ClusterFile) -> None:
    proc = run_cli("cluster", "status", "--dir", shared_cluster.dir, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    data = out_json(proc)
    assert data["cmd"] == "status"
    assert [n["id"] for n in data["nodes"]] == ["A", "B", "C", "D", "E"]
    for node, entry in zip(data["nodes"], shared_cluster.nodes, strict=True):
        assert node["up"] is True and node["status"] == "normal"
        assert (node["zone"], node["pid"], node["port"], node["http_port"]) == (
            entry.zone,
            entry.pid,
            entry.port,
            entry.http_port,
        )
    table = run_cli("cluster", "status", "--cluster", shared_cluster.dir)
    assert (
        table.returncode == 0
        and b"5/5 running" in table.stdout
        and str(shared_cluster.nodes[0].port).encode() in table.stdout
    )


def test_put_get_delete_roundtrip_with_contexts(shared_cluster: ClusterFile) -> None:
    where = ("--cluster", shared_cluster.dir)
    put = out_json(run_cli("put", "cli", "cart", '{"items": [1, 2]}', *where, "-o", "json"))
    assert put["ok"] and put["acks"] >= 2 and put["cmd"] == "put"
    got = out_json(run_cli("get", "cli", "cart", *where, "-o", "json", "-c", "ALL"))
    assert got["found"] and got["values"] == [{"items": [1, 2]}] and got["siblings"] == 1
    # A second blind write through another coordinator is concurrent: two siblings.
    run_cli("put", "cli", "cart", '"other"', *where, "--via", "E")
    both = out_json(run_cli("get", "cli", "cart", *where, "-o", "json"))
    assert sorted(map(json.dumps, both["values"])) == sorted([json.dumps({"items": [1, 2]}), '"other"'])
    # Writing back with the context replaces both.
    merged = run_cli("put", "cli", "cart", '"merged"', *where, "--context", both["context"])
    assert merged.returncode == 0, merged.stderr
    assert out_json(run_cli("get", "cli", "cart", *where, "-o", "json"))["values"] == ["merged"]
    deleted = run_cli("delete", "cli", "cart", *where, "--context", "auto", "-o", "json")
    assert out_json(deleted)["cmd"] == "delete"
    gone = run_cli("get", "cli", "cart", *where)
    assert gone.returncode == 3 and b"not found" in gone.stderr


def test_raw_output_composes_in_a_shell_pipeline(shared_cluster: ClusterFile) -> None:
    env_cmd = f"{sys.executable} -P -m bhandar_cli"
    script = f"""
        set -e
        B="{env_cmd}"
        $B put cli greeting 'hello world' --cluster {shared_cluster.dir} >/dev/null
        v=$($B get cli greeting -o raw --cluster {shared_cluster.dir})
        test "$v" = "hello world"
        $B get cli greeting -o raw --cluster {shared_cluster.dir} | tr a-z A-Z
        printf '%s' "$v!" | $B put cli copy - --cluster {shared_cluster.dir} >/dev/null
        $B get cli copy -o raw --cluster {shared_cluster.dir}
        $B incr counters visits 5 -o raw --cluster {shared_cluster.dir} >/dev/null
        $B incr counters visits --cluster {shared_cluster.dir} -o raw
    """
    proc = subprocess.run(["sh", "-c", script], capture_output=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().splitlines() == ["HELLO WORLD", "hello world!", "6"]


def test_raw_prints_each_sibling_on_its_own_line(shared_cluster: ClusterFile) -> None:
    where = ("--cluster", shared_cluster.dir)
    run_cli("put", "cli", "pair", "left", *where, "--via", "A")
    run_cli("put", "cli", "pair", "right", *where, "--via", "D")
    proc = run_cli("get", "cli", "pair", "-o", "raw", *where)
    assert proc.returncode == 0
    assert sorted(proc.stdout.decode().splitlines()) == ["left", "right"]


def test_binary_stdin_round_trips_exactly(shared_cluster: ClusterFile) -> None:
    blob = bytes(range(256)) * 3
    assert run_cli("put", "cli", "blob", "-", "--cluster", shared_cluster.dir, stdin=blob).returncode == 0
    proc = run_cli("get", "cli", "blob", "-o", "raw", "--cluster", shared_cluster.dir)
    assert proc.stdout == blob


def test_a_value_that_starts_like_json_but_does_not_parse_warns(shared_cluster: ClusterFile) -> None:
    where = ("--cluster", shared_cluster.dir)
    for args, stdin in ((("put", "cli", "typo1", '{"x":'), None), (("put", "cli", "typo2", "-"), b"[1, 2\n")):
        proc = run_cli(*args, *where, stdin=stdin)
        assert proc.returncode == 0, proc.stderr
        (line,) = proc.stderr.decode().splitlines()
        assert line.startswith("bhandar: warning: stored as the string ") and "does not parse" in line, line
    proc = run_cli("get", "cli", "typo2", "-o", "raw", *where)
    assert proc.stdout.decode().splitlines() == ["[1, 2"]


def test_exit_codes(shared_cluster: ClusterFile, tmp_path: Path) -> None:
    where = ("--cluster", shared_cluster.dir)
    missing = run_cli("get", "cli", "never-written", *where, "-o", "json")
    assert missing.returncode == 3
    assert out_json(missing)["found"] is False
    usage = run_cli("get", "cli", "k", *where, "-c", "MOST")
    assert usage.returncode == 2 and b"consistency" in usage.stderr
    assert run_cli("get", "cli", *where).returncode == 2  # a missing argument
    # Input the store refuses (incr on a siblings keyspace) is the caller's fault: exit 2, and the
    # JSON failure goes to stdout too.
    refused = run_cli("incr", "cli", "greeting", *where, "-o", "json")
    assert refused.returncode == 2
    body = out_json(refused)
    assert body["ok"] is False and body["code"] == "bad_input" and body["cmd"] == "incr"
    assert b"counter" in refused.stderr
    # No cluster here: one line on stderr, exit 1.
    nowhere = run_cli("get", "cli", "k", "--cluster", str(tmp_path / "none"))
    assert nowhere.returncode == 1
    assert len(nowhere.stderr.decode().strip().splitlines()) == 1 and b"cluster up" in nowhere.stderr
    # $BHANDAR_CLUSTER is the default directory.
    via_env = run_cli("get", "cli", "greeting", "-o", "raw", env={"BHANDAR_CLUSTER": shared_cluster.dir})
    assert via_env.returncode == 0 and via_env.stdout == b"hello world\n"


def test_stale_cluster_file_is_one_line_and_exit_1(shared_cluster: ClusterFile, tmp_path: Path) -> None:
    stale = cluster_file.ClusterFile(
        str(tmp_path), tuple(n.__class__(**{**n.__dict__, "pid": 0}) for n in shared_cluster.nodes)
    )
    cluster_file.save(stale)
    for args in (
        ("cluster", "status", "--dir", str(tmp_path)),
        ("get", "a", "b", "--cluster", str(tmp_path)),
    ):
        proc = run_cli(*args, "-o", "json")
        assert proc.returncode == 1
        assert b"stale cluster file" in proc.stderr and len(proc.stderr.splitlines()) == 1
        assert out_json(proc)["ok"] is False
    (tmp_path / "cluster.json").write_text("{not json")
    broken = run_cli("cluster", "heal", "--dir", str(tmp_path))
    assert broken.returncode == 1 and b"unreadable" in broken.stderr
