"""Client tokens on a process cluster: 401 without a valid token, 403 without the role, 429 past a
token's rate (and recovery once the client slows down), over HTTP (httpx) and through the CLI
with $BHANDAR_TOKEN; token create, list and revoke; a revocation reaches every node."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from bhandar_cli.fleet.cluster_file import ClusterFile, client_access
from bhandar_cli.node.net.blocking_rpc import RpcError
from bhandar_cli.node.net.rpc import rpc_once
from bhandar_cli.security.access import ClientAccess
from tests.e2e.conftest import (
    http_base,
    http_client,
    kill_all,
    rpc,
    run_cli,
    start_cluster,
    tls_verify,
    wait_for,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterFile]:
    directory = tmp_path_factory.mktemp("auth") / "cluster"
    try:
        yield start_cluster(directory, nodes=3)
    finally:
        kill_all(directory)


def cli(cluster: ClusterFile, *args: str, token: str | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {"BHANDAR_TOKEN": token} if token is not None else None
    return run_cli(*args, "--cluster", cluster.dir, env=env)


def one_json(proc: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1, (proc.stdout, proc.stderr)
    return json.loads(lines[0])  # type: ignore[no-any-return]


def new_token(cluster: ClusterFile, keyspace: str, role: str, *rate: str) -> dict[str, Any]:
    made = cli(cluster, "cluster", "token", "create", "-k", keyspace, "-r", role, *rate, "-o", "json")
    assert made.returncode == 0, made.stderr
    return one_json(made)


def url(cluster: ClusterFile, node: str, path: str) -> str:
    return f"{http_base(cluster, node)}{path}"


def test_http_refuses_without_a_valid_token_with_401_and_says_why(cluster: ClusterFile) -> None:
    verify = tls_verify(cluster)
    for headers in ({}, {"Authorization": "Bearer bht_00000000_nope"}, {"Authorization": "Basic x"}):
        got = httpx.get(url(cluster, "A", "/v1/kv/web/k"), headers=headers, verify=verify, timeout=15)
        assert got.status_code == 401, got.text
        assert got.headers["www-authenticate"].startswith("Bearer")
        body = got.json()
        assert body["code"] == "unauthenticated" and "\n" not in body["error"] and body["error"]
    assert httpx.get(url(cluster, "A", "/v1/status"), verify=verify, timeout=15).status_code == 401
    assert httpx.get(url(cluster, "A", "/metrics"), verify=verify, timeout=15).status_code == 401


def test_a_read_token_cannot_write_and_a_write_token_stays_in_its_keyspace(cluster: ClusterFile) -> None:
    admin = http_client(cluster)
    assert admin.put(url(cluster, "A", "/v1/kv/web/roles"), json={"value": 1}).status_code == 204
    reader, writer = new_token(cluster, "web", "read"), new_token(cluster, "web", "write")
    as_reader = http_client(cluster, token=reader["token"])
    as_writer = http_client(cluster, token=writer["token"])
    wait_for(lambda: as_reader.get(url(cluster, "B", "/v1/kv/web/roles")).status_code == 200, 10, "gossip")
    refused = as_reader.put(url(cluster, "B", "/v1/kv/web/roles"), json={"value": 2})
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    reason = refused.json()["error"]
    assert reader["id"] in reason and "web" in reason and "write" in reason
    wait_for(lambda: as_writer.get(url(cluster, "C", "/v1/kv/web/roles")).status_code == 200, 10, "gossip")
    assert as_writer.put(url(cluster, "C", "/v1/kv/web/roles"), json={"value": 3}).status_code == 204
    assert as_writer.get(url(cluster, "C", "/v1/status")).status_code == 200  # views: any token
    for method, path, body in (
        ("PUT", "/v1/kv/kv/roles", {"value": 1}),
        ("GET", "/v1/kv/kv/roles", None),
        ("PUT", "/v1/keyspaces/newks", {}),
    ):
        got = as_writer.request(method, url(cluster, "C", path), json=body)
        assert got.status_code == 403, (method, path, got.text)
    assert admin.put(url(cluster, "C", "/v1/keyspaces/newks"), json={}).status_code in (200, 201)


def test_the_cli_exits_1_with_the_reason_and_json_codes(cluster: ClusterFile) -> None:
    writer = new_token(cluster, "cli", "write")
    token = writer["token"]
    put = ("put", "cli", "auth", "1", "--via", "C")
    wait_for(lambda: cli(cluster, *put, token=token).returncode == 0, 10, "C to learn the token")
    assert cli(cluster, "get", "cli", "auth", "-c", "ALL", token=token).returncode == 0
    bad = cli(cluster, "get", "cli", "auth", "-o", "json", token="bht_00000000_wrong")
    assert bad.returncode == 1 and one_json(bad)["code"] == "unauthenticated"
    assert bad.stderr.decode().count("\n") == 1 and "unknown token" in bad.stderr.decode()
    for args in (
        ("put", "kv", "auth", "1"),
        ("keyspace", "create", "viacli"),
        ("cluster", "partition", "A", "|", "B"),
    ):
        proc = cli(cluster, *args, "-o", "json", token=token)
        assert proc.returncode == 1 and one_json(proc)["code"] == "forbidden", (args, proc.stdout)
        assert "needs the" in proc.stderr.decode(), args
    assert rpc(cluster, "A", "info")["partitions"] == []  # the refused partition changed nothing


def test_admin_operations_over_rpc_need_admin_and_a_snapshot_name_cannot_escape(
    cluster: ClusterFile, tmp_path: Path
) -> None:
    writer = new_token(cluster, "*", "write")["token"]
    entry = cluster.node("A")

    def call(token: str, op: str, **args: Any) -> Any:
        access = ClientAccess(client_access(cluster).ca_cert, token)
        return trio.run(lambda: rpc_once(entry.host, entry.port, op, 3.0, "A", access, **args))

    wait_for(lambda: _code(lambda: call(writer, "info")) == "", 10, "A to learn the token")
    admin_ops: list[tuple[str, dict[str, Any]]] = [
        ("shutdown", {}),
        ("partition", {"groups": [["A"]]}),
        ("snapshot", {"snapshot": "../x"}),
    ]
    for op, args in admin_ops:
        assert _code(lambda: call(writer, op, **args)) == "forbidden", op  # noqa: B023
    escape = tmp_path / "escaped"
    for name in ("../escaped", str(escape), "a/b", ".."):
        assert _code(lambda: call(cluster.token, "snapshot", snapshot=name)) == "bad_input", name  # noqa: B023
    assert not escape.exists() and not (Path(cluster.dir) / "escaped").exists()
    assert call(cluster.token, "snapshot", snapshot="fine") >= 0
    assert (Path(cluster.dir) / "snapshots" / "fine" / "A").is_dir()
    assert process_alive(cluster, "A")


def _code(action: Any) -> str:
    try:
        action()
    except RpcError as exc:
        return exc.code or str(exc)
    return ""


def process_alive(cluster: ClusterFile, node: str) -> bool:
    from bhandar_cli.fleet import pids

    return pids.pid_alive(cluster.node(node).pid)


def test_past_its_rate_a_token_gets_429_with_retry_after_then_recovers(cluster: ClusterFile) -> None:
    limited = new_token(cluster, "web", "read", "--rate", "2", "--burst", "2")
    client = http_client(cluster, token=limited["token"])
    target = url(cluster, "A", "/v1/kv/web/rate")
    wait_for(lambda: client.get(target).status_code != 401, 10, "A to learn the token")
    statuses = [client.get(target) for _ in range(10)]
    slowed = [r for r in statuses if r.status_code == 429]
    assert slowed, [r.status_code for r in statuses]
    assert int(slowed[0].headers["retry-after"]) >= 1
    assert slowed[0].json()["code"] == "rate_limited" and "slow down" in slowed[0].json()["error"]
    wait_for(lambda: client.get(target).status_code in (200, 404), 5, "the token to pass again")


def test_through_the_cli_a_limited_token_is_told_to_slow_down_then_passes(cluster: ClusterFile) -> None:
    token = new_token(cluster, "cli", "read", "--rate", "0.05", "--burst", "1")["token"]
    args = ("get", "cli", "slow", "--via", "B", "-o", "json")
    wait_for(lambda: cli(cluster, *args, token=token).returncode != 1, 10, "B to learn the token")
    # A CLI process takes seconds to start on a busy machine: use up the bucket just before it
    # asks (one request comes back every 20 s).
    http = http_client(cluster, token=token)
    assert http.get(url(cluster, "B", "/v1/kv/cli/slow")).status_code in (404, 429)
    refused = cli(cluster, *args, token=token)
    assert refused.returncode == 1, refused.stderr
    assert one_json(refused)["code"] == "rate_limited" and b"slow down" in refused.stderr
    wait_for(lambda: cli(cluster, *args, token=token).returncode == 3, 40, "the token to pass again")


def test_tokens_are_listed_without_secrets_and_a_revoked_one_is_refused_by_every_node(
    cluster: ClusterFile,
) -> None:
    made = new_token(cluster, "web", "read")
    token = made["token"]
    listed = cli(cluster, "cluster", "token", "list", "-o", "json")
    assert listed.returncode == 0 and token.encode() not in listed.stdout
    rows = {r["id"]: r for r in one_json(listed)["tokens"]}
    assert rows[made["id"]]["grants"] == {"web": "read"} and rows[made["id"]]["revoked"] is False
    assert "digest" not in rows[made["id"]]
    client = http_client(cluster, token=token)

    def status(node: str) -> int:
        return client.get(url(cluster, node, "/v1/status")).status_code

    for node in cluster.names:
        wait_for(lambda: status(node) == 200, 10, f"{node} to learn the token")  # noqa: B023
    as_reader = cli(cluster, "cluster", "token", "list", token=token)
    assert as_reader.returncode == 1 and b"admin" in as_reader.stderr
    assert cli(cluster, "cluster", "token", "revoke", made["id"]).returncode == 0
    started = time.monotonic()
    for node in cluster.names:
        wait_for(lambda: status(node) == 401, 10, f"{node} to refuse the revoked token")  # noqa: B023
    assert time.monotonic() - started < 10
    revoked = one_json(cli(cluster, "cluster", "token", "list", "-o", "json"))["tokens"]
    assert {r["id"]: r["revoked"] for r in revoked}[made["id"]] is True
