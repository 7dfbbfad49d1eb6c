"""Closed by default, everywhere: the doors a security review found open, each tried as an attacker
would and each found shut.

- A node that joined a cluster with a token (docs/joining.md's command) checks tokens like every
  other node: an anonymous or forged `PUT` over HTTPS is a 401 and an anonymous `token_create` is
  refused, while the cluster's own admin token (learnt through gossip) works there.
- Before a connection has said who it is, it is held to small limits: 200 idle connections and
  a 16 MiB hello move a node's peak memory by less than 4 MiB (/proc/PID/status) and it goes on
  serving meanwhile; the oldest idle ones are closed to make room.
- A TLS stream cut without close_notify is counted and logged as a truncation.
- Only the issuing node (the first, unless `cluster up --issuers` names others) holds the CA key,
  so another node, taken over, can sign no certificate; a node runs without token checks only
  when told so (`--admit-anyone`) and only on loopback.
- The web view answers only requests that name it (127.0.0.1, localhost, [::1] and its port) in
  Host, as a page that came by DNS rebinding does not, and runs only commands that carry the key
  this run wrote into its own page.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from bhandar_cli.core.model.access_tokens import ALL_KEYSPACES
from bhandar_cli.core.protocol.client_messages import GetRequest, GetResult, PutRequest, PutResult
from bhandar_cli.core.wire import from_wire, to_wire
from bhandar_cli.fleet.cluster_file import ClusterFile, NodeEntry
from bhandar_cli.fleet.placement import free_ports
from bhandar_cli.node.http.asgi import HANDSHAKE_TIMEOUT
from bhandar_cli.node.net.admission import MAX_PENDING
from bhandar_cli.node.net.blocking_rpc import RpcError
from bhandar_cli.node.net.codec import DEFAULT_MAX_FRAME_SIZE, encode_frame
from bhandar_cli.node.net.rpc import rpc_once
from bhandar_cli.security import pki
from bhandar_cli.security.access import ClientAccess
from bhandar_cli.security.auth import mint
from tests.e2e.conftest import JOINER_HOST, Joiner, raw_connection, rpc, run_cli, tls_verify, wait_for
from tests.e2e.test_multihost import member_rows, mint_join_token
from tests.e2e.test_rogue import closed_by_node
from tests.web.conftest import WebProcess, page_key, start_web


@pytest.fixture
def joined(spread_cluster: ClusterFile, joiners: Joiner, tmp_path: Path) -> Iterator[ClusterFile]:
    """The spread cluster with node E joined on 127.0.0.6 by docs/joining.md's command, E in the
    cluster file's shape (with its HTTP port) so the tests' helpers reach it like the others."""
    cluster = spread_cluster
    minted = mint_join_token(cluster)
    port, http_port = free_ports(2, JOINER_HOST)
    joiner = joiners.start("E", minted["token"], minted["address"], JOINER_HOST, port, http_port)
    entry = NodeEntry("E", "z1", JOINER_HOST, port, http_port, str(tmp_path / "E"), "")

    def everyone_sees_e() -> bool:
        assert joiner.poll() is None, (tmp_path / "E.log").read_text(errors="replace")
        rows = [member_rows(cluster, n.id).get("E") for n in cluster.nodes]
        return all(r is not None and r["up"] and r["status"] == "normal" for r in rows)

    wait_for(everyone_sees_e, 60.0, "every node to see E up and normal")
    yield replace(cluster, nodes=(*cluster.nodes, entry))


def _https(cluster: ClusterFile) -> httpx.Client:
    return httpx.Client(verify=tls_verify(cluster), timeout=15)


def test_a_joined_node_admits_no_one_without_a_token(joined: ClusterFile) -> None:
    cluster, e = joined, joined.node("E")
    url = f"https://{e.host}:{e.http_port}/v1/kv/kv/outsider"
    ca = Path(cluster.dir) / pki.TLS_DIR / pki.CA_CERT
    with _https(cluster) as http:
        anonymous = http.put(url, json={"value": "written by anyone"})
        assert anonymous.status_code == 401, anonymous.text
        assert anonymous.json()["code"] == "unauthenticated"
        forged = http.put(url, json={"value": "x"}, headers={"Authorization": "Bearer bht_00000000_forged"})
        assert forged.status_code == 401, forged.text

        # An admin token minted by an outsider: refused, and no node learns of it.
        _, record = mint({ALL_KEYSPACES: "admin"}, 0.0, 0, 0.0)

        def token_create(token: str | None) -> Any:
            access = ClientAccess(ca, token)
            return trio.run(
                lambda: rpc_once(e.host, e.port, "token_create", 3.0, "E", access, record=to_wire(record))
            )

        for token in (None, "bht_00000000_forged"):
            with pytest.raises(RpcError) as refused:
                token_create(token)
            assert refused.value.code == "unauthenticated", refused.value
        assert record.id not in {r["id"] for r in rpc(cluster, "A", "token_list")}

        # The cluster's admin token reached E through gossip: the door opens for it alone.
        admin = {"Authorization": f"Bearer {cluster.token}"}
        wait_for(
            lambda: http.put(url, json={"value": "by the teacher"}, headers=admin).status_code == 204,
            30.0,
            "E to admit the cluster's admin token",
        )
        got = http.get(url, headers=admin)
        assert got.status_code == 200 and got.json()["values"] == ["by the teacher"], got.text


# --- before authentication: small frames, a deadline, a cap ---------------------------------------

IDLE = 200
HUGE_HELLO = encode_frame({"hello": "client", "pad": b"\0" * (DEFAULT_MAX_FRAME_SIZE - 64)})


def _kib(pid: int, field: str) -> int:
    """A field of /proc/PID/status in KiB (VmRSS: resident now, VmHWM: its peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return int(value.split()[0])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _is_closed(sock: socket.socket) -> bool:
    """Whether the node closed `sock` (its end, or a reset); never waits."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True


def test_idle_connections_and_a_16_mib_hello_cost_a_node_little_and_do_not_stop_it(
    small_cluster: ClusterFile,
) -> None:
    cluster = small_cluster
    a = cluster.node("A")
    assert rpc(cluster, "A", "info", counts=False)["id"] == "A"
    Path(f"/proc/{a.pid}/clear_refs").write_text("5")  # the peak (VmHWM) starts again from now
    before = _kib(a.pid, "VmHWM")
    idle = [socket.create_connection((a.host, a.port), timeout=5) for _ in range(IDLE)]
    try:
        # It serves while they are open (a new client comes in past them) ...
        put = PutRequest(0, "kv", "under-siege", b'"served"', "application/json", None, "QUORUM")
        assert isinstance(from_wire(rpc(cluster, "A", "request", msg=to_wire(put))), PutResult)
        # ... and keeps at most MAX_PENDING of them: the oldest are closed to make room, long
        # before the hello deadline would close them.
        wait_for(
            lambda: sum(not _is_closed(s) for s in idle) <= MAX_PENDING, 2.0, "the node to shed idle ones"
        )
        # A 16 MiB hello inside TLS is refused by its length prefix, not buffered and decoded.
        huge = raw_connection(cluster, "A")
        with contextlib.suppress(OSError):  # the node closes while we are still sending
            huge.sendall(HUGE_HELLO)
        assert closed_by_node(huge, within=5.0)
        huge.close()
        grown = _kib(a.pid, "VmHWM") - before
        assert grown < 4 * 1024, f"node A's peak memory grew by {grown / 1024:.1f} MiB"
        connections = rpc(cluster, "A", "info", counts=False)["connections"]
        assert connections["evicted"] >= IDLE - MAX_PENDING, connections
    finally:
        for sock in idle:
            sock.close()
    got = from_wire(rpc(cluster, "B", "request", msg=to_wire(GetRequest(0, "kv", "under-siege", "ALL"))))
    assert isinstance(got, GetResult) and got.record is not None, got


def test_the_https_port_gives_a_silent_connection_a_short_handshake_deadline(
    small_cluster: ClusterFile,
) -> None:
    a = small_cluster.node("A")
    with socket.create_connection((a.host, a.http_port), timeout=5) as silent:  # never a ClientHello
        wait_for(lambda: _is_closed(silent), HANDSHAKE_TIMEOUT + 3.0, "node A to close it")


def test_a_client_stream_cut_without_close_notify_is_reported_as_truncation(
    small_cluster: ClusterFile,
) -> None:
    cluster = small_cluster
    a = cluster.node("A")
    before = rpc(cluster, "A", "info", counts=False)["transport"]["truncated"]
    sock = raw_connection(cluster, "A")
    sock.sendall(
        encode_frame({"hello": "client", "token": cluster.token}) + encode_frame({"id": 1, "op": "heal"})
    )
    assert sock.recv(65536)  # its answer: the connection is past its hello, between frames
    sock.close()  # Python's TLS socket closes without close_notify: a cut, as on the path
    wait_for(
        lambda: rpc(cluster, "A", "info", counts=False)["transport"]["truncated"] == before + 1,
        10.0,
        "node A to count the cut stream",
    )
    assert "cut without close_notify" in Path(a.log).read_text(errors="replace")


# --- the web view: its own page only ----------------------------------------------------------------


@pytest.fixture
def web_view(tmp_path: Path) -> Iterator[WebProcess]:
    yield from start_web(tmp_path, "--nodes", "3")


def _ask(web: WebProcess, method: str, path: str, headers: dict[str, str], body: Any = None) -> int:
    """The status of a request to the web view with exactly these headers (Host included)."""
    parts = urllib.parse.urlsplit(web.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_the_web_view_answers_only_its_own_page_on_loopback(web_view: WebProcess) -> None:
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends requests
    that name evil.example in Host and Origin. They are refused, as is a command that lacks the
    key this run wrote into its page; the same command with the key runs."""
    port = urllib.parse.urlsplit(web_view.url).port
    evil = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    command = {"line": "kill A"}
    as_json = {"Content-Type": "application/json"}
    assert _ask(web_view, "GET", "/api/state", evil) == 403
    assert _ask(web_view, "GET", "/", evil) == 403
    assert _ask(web_view, "POST", "/api/command", {**evil, **as_json}, command) == 403
    ours = {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}", **as_json}
    assert _ask(web_view, "POST", "/api/command", ours, command) == 403  # no key
    assert _ask(web_view, "POST", "/api/command", {**ours, "X-Bhandar-Key": "guessed"}, command) == 403
    assert "web> kill A" not in web_view.output()
    key = {"X-Bhandar-Key": page_key(web_view.url)}
    assert _ask(web_view, "POST", "/api/command", {**evil, **as_json, **key}, command) == 403
    for host in ("127.0.0.1", "localhost"):
        assert _ask(web_view, "GET", "/api/state", {"Host": f"{host}:{port}"}) == 200
    assert _ask(web_view, "POST", "/api/command", {**ours, **key}, {"line": "status"}) == 200
    wait_for(lambda: "web> status" in web_view.output(), 10.0, "the page's command to run")
    assert "web> kill A" not in web_view.output()


# --- who holds the CA key; running without tokens ---------------------------------------------------


def _command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def test_only_the_issuing_node_holds_the_ca_key_so_another_cannot_mint_a_certificate(
    small_cluster: ClusterFile,
) -> None:
    """A node taken over by an attacker has its own certificate, nothing more: without the CA key
    it can mint no join token and sign no certificate (for a node id of its choosing)."""
    cluster = small_cluster
    assert [("--ca-key" in _command_line(n.pid)) for n in cluster.nodes] == [True, False, False]
    for node in ("B", "C"):
        answer = rpc(cluster, node, "join_token", ttl=60.0)
        assert "holds no CA key" in answer["refused"], answer
    via_b = run_cli("cluster", "join-token", "create", "--dir", cluster.dir, "--via", "B")
    assert via_b.returncode == 1, via_b.stderr
    (line,) = via_b.stderr.decode().strip().splitlines()
    assert "node B cannot issue join tokens" in line and "--via A" in line
    made = run_cli("cluster", "join-token", "create", "--dir", cluster.dir, "-o", "json")
    assert made.returncode == 0 and json.loads(made.stdout)["via"] == "A", made.stderr


def test_no_token_checks_takes_a_flag_that_says_so_and_loopback(tmp_path: Path) -> None:
    """A node checks tokens unless told `--admit-anyone`, which only a node on loopback takes
    (and never one that joins a cluster): started bare on 127.0.0.1 it admits no one."""
    bare = ("node", "run", "--id", "Z", "--data-dir", str(tmp_path / "Z"))
    off = run_cli(*bare, "--host", "0.0.0.0", "--admit-anyone")
    assert off.returncode == 2 and "refusing --admit-anyone on 0.0.0.0" in off.stderr.decode(), off.stderr
    assert not (tmp_path / "Z").exists()
    joining = run_cli(*bare, "--join", "127.0.0.1:1", "--admit-anyone", env={"BHANDAR_JOIN_TOKEN": "bhj1.x"})
    assert joining.returncode == 2 and "leave out --admit-anyone" in joining.stderr.decode(), joining.stderr
    (http_port,) = free_ports(1, "127.0.0.1")
    node = subprocess.Popen(
        [sys.executable, "-P", "-m", "bhandar_cli", *bare, "--http-port", str(http_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:

        def answer() -> httpx.Response | None:
            try:
                return httpx.put(f"http://127.0.0.1:{http_port}/v1/keyspaces/mine", json={}, timeout=5)
            except httpx.TransportError:
                return None

        wait_for(lambda: answer() is not None, 30.0, "the bare node to serve HTTP")
        refused = answer()
        assert refused is not None and refused.status_code == 401, refused
        assert (
            "bhandar cluster token create" in refused.json()["error"] or "Bearer" in refused.json()["error"]
        )
    finally:
        os.killpg(node.pid, signal.SIGKILL)
        node.wait(timeout=10)
