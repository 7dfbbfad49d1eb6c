"""`bhandar pipe` on a process cluster: a stream with bad lines mixed in, results in input order or
as they finish, and the exit status."""

from __future__ import annotations

import json
import uuid
from typing import Any

from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import run_cli


def results(stdout: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.decode().splitlines()]


def test_bad_lines_are_answered_at_their_line_while_the_rest_succeed(shared_cluster: ClusterFile) -> None:
    tag = uuid.uuid4().hex[:8]
    lines: list[str] = []
    bad: dict[int, str] = {}
    for i in range(60):
        lines.append(f"put cli {tag}-{i} {i}")
        lines.append(f"get cli {tag}-{i}")
        if i % 15 == 3:
            bad[len(lines) + 1] = "bad_input"
            lines.append(f"put cli {tag}-x 'unclosed")
            bad[len(lines) + 1] = "unknown_keyspace"
            lines.append(f"put nosuchks {tag} 1")
            bad[len(lines) + 1] = "not_found"
            lines.append(f"get cli {tag}-missing")
    proc = run_cli("pipe", "--cluster", shared_cluster.dir, "--window", "16", stdin="\n".join(lines).encode())
    assert proc.returncode == 1, proc.stderr
    out = results(proc.stdout)
    assert [r["line"] for r in out] == list(range(1, len(lines) + 1))  # input order
    assert [r["cmd"] for r in out] == [line.split()[0] for line in lines]
    assert {r["line"]: r["code"] for r in out if not r["ok"]} == bad
    gets = [r for r in out if r["cmd"] == "get" and r["ok"]]
    assert [r["values"] for r in gets] == [[i] for i in range(60)]
    assert f"{len(bad)} of {len(lines)} commands failed" in proc.stderr.decode()


def test_unordered_returns_every_line_number(shared_cluster: ClusterFile) -> None:
    tag = uuid.uuid4().hex[:8]
    lines = [f"put cli {tag}-{i} '\"v{i}\"'" for i in range(100)] + ["", "# done"]
    proc = run_cli(
        "pipe", "--cluster", shared_cluster.dir, "--unordered", "-c", "ALL", stdin="\n".join(lines).encode()
    )
    assert proc.returncode == 0, proc.stderr
    out = results(proc.stdout)
    assert sorted(r["line"] for r in out) == list(range(1, 101))
    assert all(r["ok"] and r["acks"] == 3 for r in out)


def test_json_input_and_exit_zero(shared_cluster: ClusterFile) -> None:
    key = uuid.uuid4().hex
    stream = [
        {"op": "put", "ks": "cli", "key": key, "value": ["rice", "oil"]},
        {"op": "get", "ks": "cli", "key": key},
        {"op": "incr", "ks": "counters", "key": key, "delta": 2},
    ]
    proc = run_cli(
        "pipe",
        "-i",
        "json",
        "--cluster",
        shared_cluster.dir,
        stdin="\n".join(map(json.dumps, stream)).encode(),
    )
    assert proc.returncode == 0, proc.stderr
    out = results(proc.stdout)
    assert [r["line"] for r in out] == [1, 2, 3]
    assert out[1]["values"] == [["rice", "oil"]] and out[2]["value"] == 2


def test_a_wrong_command_line_is_exit_2(shared_cluster: ClusterFile) -> None:
    for args in (("--window", "0"), ("-c", "MOST"), ("-i", "yaml")):
        proc = run_cli("pipe", "--cluster", shared_cluster.dir, *args, stdin=b"get kv k\n")
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stdout == b""
