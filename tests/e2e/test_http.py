"""The HTTP API of each node (DESIGN.md §5), through httpx as curl would use it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bhandar_cli.core.membership.ring import Ring, key_token
from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import http_client, rpc, run_cli, wait_for


@pytest.fixture
def http(shared_cluster: ClusterFile) -> Iterator[httpx.Client]:
    with http_client(shared_cluster, "B") as client:
        yield client


def test_put_get_delete_and_contexts(http: httpx.Client) -> None:
    assert http.put("/v1/kv/web/user:1", json={"value": {"name": "Rahim"}}).status_code == 204
    got = http.get("/v1/kv/web/user:1", params={"consistency": "ALL"})
    assert got.status_code == 200
    assert got.json()["values"] == [{"name": "Rahim"}] and got.json()["context"]
    # A blind write makes a sibling; writing with the context replaces both.
    assert http.put("/v1/kv/web/user:1", json={"value": "blind"}).status_code == 204
    both = http.get("/v1/kv/web/user:1").json()
    assert len(both["values"]) == 2
    replaced = http.put("/v1/kv/web/user:1", json={"value": "merged", "context": both["context"]})
    assert replaced.status_code == 204
    after = http.get("/v1/kv/web/user:1").json()
    assert after["values"] == ["merged"]
    assert http.delete("/v1/kv/web/user:1", params={"context": after["context"]}).status_code == 204
    gone = http.get("/v1/kv/web/user:1")
    assert gone.status_code == 404 and "not found" in gone.json()["error"]


def test_keys_may_hold_encoded_slashes(http: httpx.Client) -> None:
    assert http.put("/v1/kv/web/a%2Fb", json={"value": 1}).status_code == 204
    assert http.get("/v1/kv/web/a%2Fb").json()["values"] == [1]
    assert http.get("/v1/kv/web/a").status_code == 404


def test_increment(http: httpx.Client) -> None:
    first = http.post("/v1/kv/counters/hits/increment", json={"delta": 3, "request_id": "r-1"})
    assert first.status_code == 200 and first.json()["value"] == 3
    retried = http.post("/v1/kv/counters/hits/increment", json={"delta": 3, "request_id": "r-1"})
    assert retried.json()["value"] == 3  # the same request id counts once
    assert http.post("/v1/kv/counters/hits/increment", json={}).json()["value"] == 4
    assert http.get("/v1/kv/counters/hits").json()["values"] == [4]


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status"),
    [
        ("PUT", "/v1/kv/web/k", {"content": b"{not json"}, 400),
        ("PUT", "/v1/kv/web/k", {"json": {"nothing": 1}}, 400),
        ("PUT", "/v1/kv/web/k", {"json": {"value": 1, "context": "%%%"}}, 400),
        ("GET", "/v1/kv/web/k?consistency=SOME", {}, 400),
        ("POST", "/v1/kv/counters/c/increment", {"json": {"delta": "x"}}, 400),
        ("POST", "/v1/kv/web/k/increment", {"json": {"delta": 1}}, 400),
        ("PUT", "/v1/kv/web/" + "k" * 2000, {"json": {"value": 1}}, 400),
        ("PUT", "/v1/kv/web/big", {"json": {"value": "x" * (1 << 20)}}, 413),
        ("PUT", "/v1/kv/web/huge", {"content": b"[" + b"1," * (1 << 21) + b"1]"}, 413),
        ("GET", "/v1/nothing", {}, 404),
        ("PATCH", "/v1/kv/web/k", {}, 405),
    ],
)
def test_bad_requests_get_clear_errors(
    http: httpx.Client, method: str, path: str, kwargs: dict[str, object], status: int
) -> None:
    response = http.request(method, path, **kwargs)  # type: ignore[arg-type]
    assert response.status_code == status, response.text
    assert response.json()["error"]


def test_a_refused_request_leaves_its_keep_alive_connection_open(http: httpx.Client) -> None:
    # Refused by its path or its query, a request is answered only after its body is read: else
    # the server closes the connection, and a request the client already sent on it fails as
    # "server disconnected". So every request below travels on one connection.
    clients = set()
    for i in range(40):
        by_path = http.put("/v1/kv/web/%FF", json={"value": i})
        by_query = http.put("/v1/kv/web/k", params={"consistency": "SOME"}, json={"value": i})
        for refused in (by_path, by_query):
            assert refused.status_code == 400 and "connection" not in refused.headers, refused.headers
        fine = http.get("/v1/kv/web/never-written")
        assert fine.status_code == 404
        clients.add(fine.extensions["network_stream"].get_extra_info("client_addr"))
    assert len(clients) == 1, clients


def test_status_and_prometheus_metrics(http: httpx.Client) -> None:
    http.put("/v1/kv/web/m", json={"value": 1})
    status = http.get("/v1/status").json()
    assert status["id"] == "B" and sorted(status["members"]) == ["A", "B", "C", "D", "E"]
    metrics = http.get("/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert 'bhandar_requests_total{consistency="QUORUM",op="put",outcome="ok"}' in text
    assert "bhandar_members 5.0" in text and "bhandar_hints_pending" in text
    assert 'bhandar_request_latency_seconds_bucket{consistency="QUORUM",le="+Inf",op="put"}' in text


def test_unavailable_is_503_and_timeout_is_504(fresh_cluster: ClusterFile) -> None:
    ring = Ring.build(fresh_cluster.names, fresh_cluster.vnodes, fresh_cluster.zones)
    replicas = ring.preference_list(key_token("web", "slow"), 3)
    coordinator, others = replicas[0], replicas[1:]
    with http_client(fresh_cluster, coordinator) as http:
        # Both other replicas answer 0.6 s late each way: after the 1 s request timeout, yet soon
        # enough that the coordinator still believes them up.
        for node in others:
            assert run_cli("cluster", "delay", node, "600", "--dir", fresh_cluster.dir).returncode == 0
        response = http.put("/v1/kv/web/slow", json={"value": 1})
        assert response.status_code == 504, response.text
        assert response.json()["code"] == "timeout"
        for node in others:
            run_cli("cluster", "delay", node, "0", "--dir", fresh_cluster.dir)
        # Cut the coordinator off from everyone: once it sees them down, QUORUM is unavailable.
        assert run_cli("cluster", "partition", coordinator, "--dir", fresh_cluster.dir).returncode == 0

        def sees_everyone_down() -> bool:
            return not any(rpc(fresh_cluster, coordinator, "info")["peers"].values())

        wait_for(sees_everyone_down, 10, f"{coordinator} to see its peers down")
        response = http.put("/v1/kv/web/slow", json={"value": 2})
        assert response.status_code == 503, response.text
        assert response.json()["code"] == "unavailable" and response.json()["needed"] == 2


def test_plain_http_to_the_https_port_is_told_to_use_https(shared_cluster: ClusterFile) -> None:
    """`curl http://127.0.0.1:PORT/...` against a TLS port: one line naming the https URL, not an
    empty reply; the node logs it; and the port still speaks HTTPS afterwards."""
    entry = shared_cluster.node("B")
    assert shared_cluster.tls
    with httpx.Client(timeout=15) as plain:
        answer = plain.get(f"http://{entry.host}:{entry.http_port}/v1/kv/kv/k?consistency=ONE")
    assert answer.status_code == 400
    url = f"https://{entry.host}:{entry.http_port}/v1/kv/kv/k?consistency=ONE"
    assert answer.text == f"this port speaks HTTPS, not plain HTTP: use {url}\n"
    log = Path(entry.log)
    wait_for(lambda: f"answered 'use {url}'" in log.read_text(errors="replace"), 10, "the log line")
    with http_client(shared_cluster, "B") as secure:
        assert secure.get("/v1/keyspaces").status_code == 200


def test_plain_http_answer_names_the_url_the_request_meant() -> None:
    from bhandar_cli.node.http.https_only import plain_http_answer

    head = b"GET /v1/kv/carts/cart:1 HTTP/1.1\r\nHost: 127.0.0.1:8443\r\nUser-Agent: curl\r\n\r\n"
    answer, url = plain_http_answer(head, 8443)
    assert url == "https://127.0.0.1:8443/v1/kv/carts/cart:1"
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n") and answer.endswith(f"use {url}\n".encode())
    # A Host that is not a host:port is not echoed; the port's own address stands in.
    _, url = plain_http_answer(b"GET / HTTP/1.1\r\nHost: <script>\r\n\r\n", 8443)
    assert url == "https://127.0.0.1:8443/"
