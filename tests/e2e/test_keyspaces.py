"""Keyspaces on a process cluster: created through the command line or HTTP, then used; an unknown
keyspace is a clear error (exit 2, HTTP 404) that creates nothing; bad names are refused."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import bearer, http_client, run_cli, tls_verify, wait_for
from tests.e2e.conftest import http_base as base

BAD_NAMES = ["%2E", "%2E%2E", "A", "a" * 65, "a%2Fb"]  # ".", "..", "A", 65 characters, "a/b"


@pytest.fixture
def http(shared_cluster: ClusterFile) -> Iterator[httpx.Client]:
    with http_client(shared_cluster, "C") as client:
        yield client


def keyspace_names(cluster: ClusterFile, node: str) -> list[str]:
    listed = httpx.get(
        base(cluster, node) + "/v1/keyspaces", headers=bearer(cluster), verify=tls_verify(cluster), timeout=15
    )
    assert listed.status_code == 200, listed.text
    return sorted(k["name"] for k in listed.json()["keyspaces"])


def one_json(proc: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1, (proc.stdout, proc.stderr)
    return json.loads(lines[0])  # type: ignore[no-any-return]


def test_unknown_keyspace_over_http_is_404_and_2000_gets_create_nothing(
    shared_cluster: ClusterFile, http: httpx.Client
) -> None:
    before = {node: keyspace_names(shared_cluster, node) for node in shared_cluster.names}
    assert {"kv", "counters"} <= set(before["C"])
    missed = http.get("/v1/kv/kvv/k")
    assert missed.status_code == 404, missed.text
    body = missed.json()
    assert body["code"] == "unknown_keyspace" and set(body) == {"error", "code"}
    assert "did you mean kv?" in body["error"] and "counters" in body["error"]
    for verb, path, kwargs in (
        ("PUT", "/v1/kv/kvv/k", {"json": {"value": 1}}),
        ("DELETE", "/v1/kv/kvv/k", {}),
        ("POST", "/v1/kv/countrs/c/increment", {"json": {"delta": 1}}),
    ):
        response = http.request(verb, path, **kwargs)  # type: ignore[arg-type]
        assert (response.status_code, response.json()["code"]) == (404, "unknown_keyspace"), response.text
    for i in range(2000):
        assert http.get(f"/v1/kv/typo{i}/k").status_code == 404
    after = {node: keyspace_names(shared_cluster, node) for node in shared_cluster.names}
    assert after == before


def test_create_a_keyspace_over_http_then_use_it_through_another_node(
    shared_cluster: ClusterFile, http: httpx.Client
) -> None:
    created = http.put("/v1/keyspaces/prices-http", json={"policy": "lww", "n": 3})
    assert created.status_code == 201, created.text
    assert created.json() == {
        "name": "prices-http",
        "policy": "lww",
        "n": 3,
        "quorum": "sloppy",
        "ttl": 0,
        "created": True,
    }
    again = http.put("/v1/keyspaces/prices-http", json={"policy": "lww"})
    assert again.status_code == 200 and again.json()["created"] is False
    other = http.put("/v1/keyspaces/prices-http", json={"policy": "siblings"})
    assert other.status_code == 409 and other.json()["code"] == "conflict", other.text
    assert "policy=lww" in other.json()["error"]
    wait_for(lambda: "prices-http" in keyspace_names(shared_cluster, "E"), 10, "E to learn prices-http")
    with http_client(shared_cluster, "E") as through_e:
        assert through_e.put("/v1/kv/prices-http/rice", json={"value": 50}).status_code == 204
        assert through_e.get("/v1/kv/prices-http/rice").json()["values"] == [50]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_are_refused_over_http(http: httpx.Client, name: str) -> None:
    response = http.put(f"/v1/keyspaces/{name}", json={})
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "bad_input" and "1 to 64 characters" in response.json()["error"]


@pytest.mark.parametrize(
    "body", [{"policy": "fifo"}, {"n": "3"}, {"n": 0}, {"quorum": "loose"}, {"colour": "red"}]
)
def test_bad_definitions_are_refused_over_http(http: httpx.Client, body: dict[str, Any]) -> None:
    response = http.put("/v1/keyspaces/fine-name", json=body)
    assert response.status_code == 400 and response.json()["code"] == "bad_input", response.text


def test_keyspace_commands_and_an_unknown_keyspace_on_the_command_line(shared_cluster: ClusterFile) -> None:
    where = ("--cluster", shared_cluster.dir)
    missed = run_cli("get", "cli_ks", "k", *where)
    assert missed.returncode == 2, missed.stderr
    error = missed.stderr.decode()
    assert error.count("\n") == 1 and "unknown keyspace 'cli_ks'; did you mean cli?" in error
    # The keyspaces that exist, sorted (other tests on this shared cluster add their own).
    names = error.split("Keyspaces: ", 1)[1].split(". ", 1)[0].split(", ")
    assert names == sorted(names) and {"cli", "counters", "crash", "kv"} <= set(names)
    as_json = run_cli("put", "kvs", "k", "v", *where, "-o", "json")
    assert as_json.returncode == 2
    assert one_json(as_json) | {"error": ""} == {
        "cmd": "put",
        "ok": False,
        "code": "unknown_keyspace",
        "error": "",
    }
    assert "did you mean kv?" in one_json(as_json)["error"]

    created = run_cli("keyspace", "create", "cli_ks", "--policy", "lww", "-n", "2", *where, "-o", "json")
    assert created.returncode == 0, created.stderr
    assert one_json(created) == {
        "cmd": "keyspace",
        "ok": True,
        "name": "cli_ks",
        "policy": "lww",
        "n": 2,
        "quorum": "sloppy",
        "ttl": 0,
        "created": True,
    }
    again = run_cli("keyspace", "create", "cli_ks", "--policy", "lww", "-n", "2", *where)
    assert again.returncode == 0 and b"exists" in again.stdout
    conflict = run_cli("keyspace", "create", "cli_ks", *where)
    assert conflict.returncode == 1 and b"already exists with policy=lww n=2" in conflict.stderr
    listed = one_json(run_cli("keyspace", "list", *where, "-o", "json"))
    assert {"name": "cli_ks", "policy": "lww", "n": 2, "quorum": "sloppy", "ttl": 0} in listed["keyspaces"]
    assert run_cli("put", "cli_ks", "k", "7", *where).returncode == 0
    assert run_cli("get", "cli_ks", "k", "-o", "raw", *where).stdout == b"7\n"


@pytest.mark.parametrize("name", [".", "..", "A", "a" * 65, "a/b"])
def test_bad_names_are_refused_on_the_command_line(shared_cluster: ClusterFile, name: str) -> None:
    proc = run_cli("keyspace", "create", name, "--cluster", shared_cluster.dir)
    assert proc.returncode == 2 and b"1 to 64 characters of a-z, 0-9, _ and -" in proc.stderr, proc.stderr
