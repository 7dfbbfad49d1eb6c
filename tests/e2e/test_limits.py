"""Bad inputs through the CLI, HTTP and raw frames on a process cluster: each a clear error, none a
traceback or an HTTP 500, and nothing stored changes. Forged contexts, and delete reading first."""

from __future__ import annotations

import base64
import json
import struct
import subprocess
from typing import Any

import cbor2
import httpx
import pytest

from bhandar_cli.core.membership.ring import Ring, key_token
from bhandar_cli.core.model.limits import MAX_CONTEXT_ACTORS, MAX_INTEGER
from bhandar_cli.fleet.cluster_file import ClusterFile
from bhandar_cli.node.net.codec import encode_frame
from tests.e2e.conftest import (
    bearer,
    http_base,
    http_client,
    raw_connection,
    rpc,
    run_cli,
    tls_verify,
    wait_for,
)
from tests.e2e.test_rogue import closed_by_node, still_serves


def token(vv: dict[str, int]) -> str:
    """A context token made by hand, as a forger would."""
    return base64.urlsafe_b64encode(cbor2.dumps(vv)).rstrip(b"=").decode("ascii")


def out_json(proc: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1, (proc.stdout, proc.stderr)
    return json.loads(lines[0])  # type: ignore[no-any-return]


def listing(cluster: ClusterFile) -> dict[str, list[list[Any]]]:
    """Every record of every node with its digest: a cluster-wide listing to compare."""
    return {n: sorted(rpc(cluster, n, "digest")) for n in cluster.names}


def homes(cluster: ClusterFile, keyspace: str, key: str) -> tuple[str, ...]:
    ring = Ring.build(cluster.names, cluster.vnodes, cluster.zones)
    return ring.preference_list(key_token(keyspace, key), 3)


# --- every class of bad input, through every face -------------------------------------------------

CLI_CASES: list[tuple[str, tuple[str | bytes, ...], bytes | None]] = [
    ("NaN", ("put", "kv", "k", "NaN"), None),
    ("Infinity inside", ("put", "kv", "k", "[1, Infinity]"), None),
    ("float overflow", ("put", "kv", "k", "--", "-1e400"), None),
    ("too deep", ("put", "kv", "k", "[" * 65 + "]" * 65), None),
    ("very deep from stdin", ("put", "kv", "k", "-"), b"[" * 200_000),
    ("NaN from stdin", ("put", "kv", "k", "-"), b'{"a": NaN}'),
    ("value too large", ("put", "kv", "k", "-"), b"x" * ((1 << 20) + 1)),
    ("key too long", ("put", "kv", "k" * 1025, "v"), None),
    ("key not UTF-8", ("put", "kv", b"k\xff", "v"), None),
    ("get key too long", ("get", "kv", "k" * 1025), None),
    ("context counter too big", ("put", "kv", "k", "v", "--context", token({"A": MAX_INTEGER + 1})), None),
    (
        "context of too many actors",
        ("put", "kv", "k", "v", "--context", token({f"N{i}": 1 for i in range(MAX_CONTEXT_ACTORS + 1)})),
        None,
    ),
    ("context too long", ("put", "kv", "k", "v", "--context", "A" * 5000), None),
    ("delete, bad context", ("delete", "kv", "k", "--context", "%%%"), None),
    ("delta 2^53", ("incr", "counters", "c", str(2**53)), None),
    ("delta -2^53", ("incr", "counters", "c", "--", str(-(2**53))), None),
    ("delta huge", ("incr", "counters", "c", str(10**40)), None),
    ("request id too long", ("incr", "counters", "c", "1", "--id", "r" * 129), None),
    ("put on counters", ("put", "counters", "c", "1"), None),
]

HTTP_CASES: list[tuple[str, str, str, dict[str, Any], int]] = [
    ("NaN", "PUT", "/v1/kv/kv/k", {"content": b'{"value": NaN}'}, 400),
    ("Infinity", "PUT", "/v1/kv/kv/k", {"content": b'{"value": [Infinity]}'}, 400),
    ("-Infinity", "PUT", "/v1/kv/kv/k", {"content": b'{"value": {"a": -Infinity}}'}, 400),
    ("float overflow", "PUT", "/v1/kv/kv/k", {"content": b'{"value": 1e400}'}, 400),
    ("too deep", "PUT", "/v1/kv/kv/k", {"content": b'{"value": ' + b"[" * 65 + b"]" * 65 + b"}"}, 400),
    ("very deep", "PUT", "/v1/kv/kv/k", {"content": b"[" * 200_000}, 400),
    ("very deep object", "PUT", "/v1/kv/kv/k", {"content": b'{"a":' * 100_000}, 400),
    ("huge integer", "PUT", "/v1/kv/kv/k", {"content": b'{"value": ' + b"9" * 5000 + b"}"}, 400),
    ("%FF key", "PUT", "/v1/kv/kv/%FF", {"json": {"value": 1}}, 400),
    ("%FE key", "GET", "/v1/kv/kv/%FE", {}, 400),
    ("bad escape", "GET", "/v1/kv/kv/%zz", {}, 400),
    ("%FF keyspace", "GET", "/v1/kv/%FF/k", {}, 400),
    ("%FF in the query", "DELETE", "/v1/kv/kv/k?context=%FF", {}, 400),
    ("key too long", "PUT", "/v1/kv/kv/" + "k" * 1025, {"json": {"value": 1}}, 400),
    ("value too large", "PUT", "/v1/kv/kv/k", {"json": {"value": "x" * (1 << 20)}}, 413),
    ("context counter", "PUT", "/v1/kv/kv/k", {"json": {"value": 1, "context": token({"A": 2**53})}}, 400),
    ("context zero", "PUT", "/v1/kv/kv/k", {"json": {"value": 1, "context": token({"A": 0})}}, 400),
    (
        "context actors",
        "PUT",
        "/v1/kv/kv/k",
        {"json": {"value": 1, "context": token({f"N{i}": 1 for i in range(MAX_CONTEXT_ACTORS + 1)})}},
        400,
    ),
    ("context too long", "DELETE", "/v1/kv/kv/k?context=" + "A" * 5000, {}, 400),
    ("delta 2^53", "POST", "/v1/kv/counters/c/increment", {"json": {"delta": 2**53}}, 400),
    ("delta -2^53", "POST", "/v1/kv/counters/c/increment", {"json": {"delta": -(2**53)}}, 400),
    ("delta float", "POST", "/v1/kv/counters/c/increment", {"json": {"delta": 1.5}}, 400),
    ("delta NaN", "POST", "/v1/kv/counters/c/increment", {"content": b'{"delta": NaN}'}, 400),
    (
        "request id",
        "POST",
        "/v1/kv/counters/c/increment",
        {"json": {"delta": 1, "request_id": "r" * 129}},
        400,
    ),
    ("put on counters", "PUT", "/v1/kv/counters/c", {"json": {"value": 1}}, 400),
]


def frame_cases() -> list[tuple[str, dict[str, Any]]]:
    def put(key: str, value: bytes, context: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "$t": "PutRequest",
            "rid": 1,
            "keyspace": "kv",
            "key": key,
            "value": value,
            "ctype": "application/json",
            "context": context,
            "consistency": "ALL",
        }

    def incr(delta: int, request_id: str = "r") -> dict[str, Any]:
        return {
            "$t": "IncrRequest",
            "rid": 1,
            "keyspace": "counters",
            "key": "c",
            "delta": delta,
            "request_id": request_id,
            "consistency": "ALL",
        }

    return [
        ("NaN", put("k", b"NaN")),
        ("Infinity inside", put("k", b'{"a":[Infinity]}')),
        ("too deep", put("k", b"[" * 65 + b"]" * 65)),
        ("very deep", put("k", b"[" * 200_000)),
        ("key too long", put("k" * 1025, b"1")),
        ("value too large", put("k", b'"' + b"x" * (1 << 20) + b'"')),
        ("context counter", put("k", b"1", {"A": 2**53})),
        ("context bignum", put("k", b"1", {"A": 2**80})),
        ("context negative", put("k", b"1", {"A": -5})),
        ("context actors", put("k", b"1", {f"N{i}": 1 for i in range(MAX_CONTEXT_ACTORS + 1)})),
        ("context actor name", put("k", b"1", {"A/../B": 1})),
        ("delta 2^53", incr(2**53)),
        ("delta bignum", incr(-(2**90))),
        ("request id", incr(1, "r" * 129)),
        ("empty request id", incr(1, "")),
    ]


def raw_frame(body: object) -> bytes:
    """A frame encoded without the codec's checks (our encoder refuses NaN)."""
    payload = cbor2.dumps([1, body])
    return struct.pack(">I", len(payload)) + payload


def test_every_bad_input_through_every_face_is_a_clear_error_and_changes_nothing(
    fresh_cluster: ClusterFile,
) -> None:
    where = ("--cluster", fresh_cluster.dir)
    assert run_cli("put", "kv", "k", '"kept"', "-c", "ALL", *where).returncode == 0
    assert run_cli("incr", "counters", "c", "5", "-c", "ALL", *where).returncode == 0
    # Right after start-up a home replica may still look down to the coordinator: then a
    # fallback took the write and hands it over a moment later. Wait until each key rests on
    # its three home replicas only, so that the comparison below sees nothing but the cases.
    placed = {
        n: {(ks, key) for ks, key in (("counters", "c"), ("kv", "k")) if n in homes(fresh_cluster, ks, key)}
        for n in fresh_cluster.names
    }
    wait_for(
        lambda: {n: {(r[0], r[1]) for r in rows} for n, rows in listing(fresh_cluster).items()} == placed,
        20,
        "both keys on their three home replicas",
    )
    before = listing(fresh_cluster)
    assert sum(len(records) for records in before.values()) == 6  # two keys on three replicas each

    for what, args, stdin in CLI_CASES:
        # Options first: a case may end with "--" and a value that starts with "-".
        proc = run_cli(args[0], *where, "-o", "json", *args[1:], stdin=stdin)  # type: ignore[arg-type]
        assert proc.returncode == 2, (what, proc.returncode, proc.stderr)
        err = proc.stderr.decode()
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (what, err)
        body = out_json(proc)
        assert body["ok"] is False and body["code"] in ("bad_input", "too_large"), (what, body)

    for node in ("A", "C"):
        with http_client(fresh_cluster, node) as http:
            for what, method, path, kwargs, status in HTTP_CASES:
                response = http.request(method, path, **kwargs)
                assert response.status_code == status, (what, response.status_code, response.text)
                assert response.json()["error"], what

    for what, msg in frame_cases():
        reply = rpc(fresh_cluster, "B", "request", msg=msg)
        assert reply["$t"] == "Failure" and reply["code"] in ("bad_input", "too_large"), (what, reply)
    # A NaN float anywhere in a frame is not CBOR we accept: the connection is closed.
    nan_request = {"op": "request", "id": 1, "msg": {"$t": "GetRequest", "rid": float("nan")}}
    with raw_connection(fresh_cluster, "D") as sock:
        sock.sendall(encode_frame({"hello": "client"}) + raw_frame(nan_request))
        assert closed_by_node(sock, within=4.0)
    still_serves(fresh_cluster, "D")

    assert listing(fresh_cluster) == before
    kept = out_json(run_cli("get", "kv", "k", "-c", "ALL", "-o", "json", *where))
    assert kept["values"] == ["kept"] and kept["siblings"] == 1 and kept["tombstones"] == 0
    assert out_json(run_cli("get", "counters", "c", "-c", "ALL", "-o", "json", *where))["values"] == [5]


# --- forged contexts ------------------------------------------------------------------------------


@pytest.mark.parametrize("claim", ["own", "other"])
def test_a_forged_context_does_not_lock_the_key(shared_cluster: ClusterFile, claim: str) -> None:
    where = ("--cluster", shared_cluster.dir)
    key = f"forged-{claim}"
    replicas = homes(shared_cluster, "kv", key)
    first = replicas[0]
    assert run_cli("put", "kv", key, '"v1"', "-c", "ALL", "--via", first, *where).returncode == 0
    ctx = out_json(run_cli("get", "kv", key, "-o", "json", "-c", "ALL", *where))["context"]
    vv = cbor2.loads(base64.urlsafe_b64decode(ctx + "=" * (-len(ctx) % 4)))
    victim = first if claim == "own" else replicas[1]
    forged = token({**vv, victim: MAX_INTEGER})
    sent = run_cli("put", "kv", key, '"forged"', "--context", forged, "-c", "ALL", "--via", first, *where)
    if claim == "own":  # the coordinator knows it never issued that counter
        assert sent.returncode == 2 and b"context from the future" in sent.stderr, sent.stderr
    else:  # it cannot prove a claim about another node's actor: accepted, and harmless
        assert sent.returncode == 0, sent.stderr
    # Every replica still coordinates writes with the context it reads, and the key stays readable.
    for via in (*replicas, *replicas):
        got = out_json(run_cli("get", "kv", key, "-o", "json", "-c", "ALL", "--via", via, *where))
        written = run_cli(
            "put", "kv", key, json.dumps(via), "--context", got["context"], "-c", "ALL", "--via", via, *where
        )
        assert written.returncode == 0, (via, written.stderr)
        after = out_json(run_cli("get", "kv", key, "-o", "json", "-c", "ALL", "--via", via, *where))
        assert after["values"] == [via]
        assert all(v["dot"][1] <= MAX_INTEGER for v in after["versions"])


# --- delete reads first ---------------------------------------------------------------------------


def test_cli_delete_reads_first_and_prints_what_it_removed(shared_cluster: ClusterFile) -> None:
    where = ("--cluster", shared_cluster.dir)
    replicas = homes(shared_cluster, "kv", "del-cli")
    assert run_cli("put", "kv", "del-cli", '"one"', "--via", replicas[0], "-c", "ALL", *where).returncode == 0
    assert run_cli("put", "kv", "del-cli", '"two"', "--via", replicas[1], "-c", "ALL", *where).returncode == 0
    table = run_cli("delete", "kv", "del-cli", *where)
    assert table.returncode == 0, table.stderr
    assert b"deleted 2 siblings" in table.stdout and b'"one"' in table.stdout and b'"two"' in table.stdout
    gone = run_cli("get", "kv", "del-cli", "-c", "ALL", *where)
    assert gone.returncode == 3
    # --context none: the blind tombstone, with the warning; the value survives it.
    assert run_cli("put", "kv", "del-blind", '"stays"', "-c", "ALL", *where).returncode == 0
    blind = run_cli("delete", "kv", "del-blind", "--context", "none", "-o", "json", *where)
    assert blind.returncode == 0 and out_json(blind)["blind"] is True
    assert b"warning: a blind delete" in blind.stderr
    stays = out_json(run_cli("get", "kv", "del-blind", "-c", "ALL", "-o", "json", *where))
    assert stays["values"] == ["stays"]


def test_http_delete_reads_first_unless_asked_for_a_blind_one(shared_cluster: ClusterFile) -> None:
    verify = tls_verify(shared_cluster)
    headers = bearer(shared_cluster)
    with http_client(shared_cluster, "C") as http:
        replicas = homes(shared_cluster, "kv", "del-http")
        for via, value in zip(replicas[:2], ("one", "two"), strict=False):
            url = f"{http_base(shared_cluster, via)}/v1/kv/kv/del-http?consistency=ALL"
            put = httpx.put(url, json={"value": value}, headers=headers, verify=verify, timeout=15)
            assert put.status_code == 204
        assert len(http.get("/v1/kv/kv/del-http", params={"consistency": "ALL"}).json()["values"]) == 2
        deleted = http.delete("/v1/kv/kv/del-http", params={"consistency": "ALL"})
        assert deleted.status_code == 204 and deleted.headers["x-bhandar-deleted"] == "2"
        assert http.get("/v1/kv/kv/del-http", params={"consistency": "ALL"}).status_code == 404

        assert http.put("/v1/kv/kv/del-blind-http", json={"value": 1}).status_code == 204
        blind = http.delete("/v1/kv/kv/del-blind-http", params={"context": "none", "consistency": "ALL"})
        assert (
            blind.status_code == 200
            and blind.json()["blind"] is True
            and "survives" in blind.json()["warning"]
        )
        assert http.get("/v1/kv/kv/del-blind-http", params={"consistency": "ALL"}).json()["values"] == [1]
