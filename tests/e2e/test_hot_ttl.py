"""Hot keys and ttl keyspaces on a process cluster: `bhandar hot` and `/v1/status` find the key the
test hammers, with its replicas; a value in a keyspace with a 2 s ttl reads as not found once it
expires, and stays so after `repair`."""

from __future__ import annotations

import json
import secrets
import subprocess
from typing import Any

import trio

from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import http_client, run_cli, wait_for


def one_json(proc: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_a_ttl_value_expires_and_repair_does_not_bring_it_back(shared_cluster: ClusterFile) -> None:
    where = ("--cluster", shared_cluster.dir)
    name = f"ttl-{secrets.token_hex(3)}"  # the shared cluster keeps the keyspaces of earlier runs
    made = one_json(
        run_cli("keyspace", "create", name, "--policy", "lww", "--ttl", "5s", *where, "-o", "json")
    )
    assert (made["ttl"], made["created"]) == (5, True)
    refused = run_cli("keyspace", "create", f"{name}-s", "--ttl", "2s", *where)
    assert refused.returncode == 2 and b"ttl needs policy=lww" in refused.stderr
    assert run_cli("put", name, "session", "s1", "-c", "ALL", *where).returncode == 0
    got = run_cli("get", name, "session", "-c", "ALL", *where, "-o", "raw")
    # 5 s: before the expiry, even on a loaded machine (2 s was not, once)
    assert (got.returncode, got.stdout.strip()) == (0, b"s1")

    def gone() -> bool:
        return run_cli("get", name, "session", "-c", "ALL", *where).returncode == 3

    wait_for(gone, timeout=20.0, what="the value to expire")

    async def repair() -> None:
        from bhandar_cli.client.openers import open_tcp_client

        async with open_tcp_client(shared_cluster.dir) as client:
            assert (await client.admin.repair())["ok"]

    trio.run(repair)
    for node in shared_cluster.names:
        assert run_cli("get", name, "session", "-c", "ONE", "--via", node, *where).returncode == 3
    listed = one_json(run_cli("keyspace", "list", *where, "-o", "json"))
    assert {k["name"]: k.get("ttl", 0) for k in listed["keyspaces"]}[name] == 5


def test_bhandar_hot_and_http_status_show_the_hammered_key(shared_cluster: ClusterFile) -> None:
    where = ("--cluster", shared_cluster.dir)
    key = f"hot-{secrets.token_hex(3)}"
    with http_client(shared_cluster, "B") as http:
        assert http.put(f"/v1/kv/kv/{key}", json={"value": 1}).status_code in (200, 201, 204)
        for _ in range(300):
            assert http.get(f"/v1/kv/kv/{key}").status_code == 200
        status = http.get("/v1/status").json()
    assert any(e["key"] == key for e in status["hot"]["keys"]), status["hot"]
    shown = one_json(run_cli("hot", "3", *where, "-o", "json"))
    top = shown["keys"][0]
    assert (top["keyspace"], top["key"]) == ("kv", key), shown
    assert top["nodes"].get("B", 0) > 0.9  # every request entered at B
    assert set(top["replicas"]) <= set(shared_cluster.names) and len(top["replicas"]) == 3
    assert run_cli("hot", "0", *where).returncode == 2
    table = run_cli("hot", *where)
    assert table.returncode == 0 and key.encode() in table.stdout


def test_a_ttl_keyspace_over_http(shared_cluster: ClusterFile) -> None:
    name = f"ttl-http-{secrets.token_hex(3)}"
    with http_client(shared_cluster, "A") as http:
        made = http.put(f"/v1/keyspaces/{name}", json={"policy": "lww", "ttl": "1m"})
        assert made.status_code == 201 and made.json()["ttl"] == 60, made.text
        same = http.put(f"/v1/keyspaces/{name}", json={"policy": "lww", "ttl": 60})
        assert same.status_code == 200 and same.json()["created"] is False
        siblings = http.put(f"/v1/keyspaces/{name}-s", json={"ttl": 60})
        assert siblings.status_code == 400 and "ttl needs policy=lww" in siblings.json()["error"]
        bad = http.put(f"/v1/keyspaces/{name}-b", json={"policy": "lww", "ttl": True})
        assert bad.status_code == 400 and '"ttl"' in bad.json()["error"]
        listed = http.get("/v1/keyspaces").json()["keyspaces"]
        assert {k["name"]: k["ttl"] for k in listed}[name] == 60
