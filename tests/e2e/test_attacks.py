"""Outsiders on a secure cluster's peer port: every forged peer action is refused, nothing changes.

Each attack is a real peer message built with the core's own encoders (to_wire, encode_frame):
a replica write of a new key, forged replica records that would overwrite every copy of a key,
gossip switching a keyspace to LWW with N=1, gossip expelling a node (generation 2**62), a phantom
member, a member's address redirected. Each is sent with (a) no TLS, (b) a self-signed
certificate, (c) node B's valid certificate claiming to be node C, and B's certificate naming C as
the sender inside a message, (d) the certificate of a decommissioned node. (A member's own
certificate relaying forged gossip is tests/e2e/test_authorship.py's.) Afterwards no value,
keyspace definition, membership record or data file has changed; the same message sent by a real
member does take effect (so the comparison would have caught an accepted attack).
"""

from __future__ import annotations

import datetime
import hashlib
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bhandar_cli.client.openers import open_tcp_client
from bhandar_cli.core.membership.gossip import GossipSyn
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import JSON, Sibling
from bhandar_cli.core.protocol.client_messages import PutRequest
from bhandar_cli.core.protocol.messages import DecommissionRequest, KeyspaceRequest, ReplicaWrite
from bhandar_cli.core.repair.antientropy import RepairPush
from bhandar_cli.core.roles.streaming import StreamRequest
from bhandar_cli.core.wire import to_wire
from bhandar_cli.fleet import pids
from bhandar_cli.fleet.cluster_data import LEFT_SUFFIX
from bhandar_cli.fleet.cluster_file import ClusterFile
from bhandar_cli.node.net.blocking_rpc import RpcError
from bhandar_cli.node.net.codec import encode_frame
from bhandar_cli.node.net.rpc import rpc_once
from bhandar_cli.security import pki
from bhandar_cli.security.access import ClientAccess
from bhandar_cli.security.signed_authorship import SignedAuthorship
from tests.e2e.conftest import kill_all, rpc, run_cli, start_cluster, wait_for
from tests.e2e.test_rogue import closed_by_node

TARGET, MEMBER, IMPERSONATED, GONE = "A", "B", "C", "E"
KEY = "attacked"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterFile]:
    """A secure cluster holding one key, whose node E was decommissioned."""
    directory = tmp_path_factory.mktemp("attacks") / "cluster"
    try:
        started = start_cluster(directory)
        assert started.tls
        put = run_cli("put", "kv", KEY, '"original"', "-c", "ALL", "--cluster", str(directory))
        assert put.returncode == 0, put.stderr

        async def decommission() -> None:
            async with open_tcp_client(directory) as client:
                await client.admin.decommission(GONE)  # returns once every node sees E as left

        trio.run(decommission)
        # A node that left has nothing more to do: the decommission stopped it (its certificate
        # and data stay), so it cannot blur the counts below.
        assert not pids.pid_alive(started.node(GONE).pid)
        yield started
    finally:
        kill_all(directory)


# --- the attacks: real peer messages ---------------------------------------------------------


def _member(cluster: ClusterFile, node: str) -> dict[str, Any]:
    return next(m for m in rpc(cluster, TARGET, "members") if m["id"] == node)


def _forged_record() -> Versioned:
    # A dot and a context far above anything real: it would supersede every copy of the key.
    big = 10**9
    context = {n: big for n in "ABCDE"}
    return Versioned((Sibling(("B", big + 1), context, b'"forged"', JSON, 4e9),))


def attacks(cluster: ClusterFile) -> dict[str, Any]:
    kv = KeyspaceDef("kv")
    victim = _member(cluster, "D")
    tokens = (1, 2, 3)
    return {
        "write-a-key": ReplicaWrite(1, kv, "planted", _forged_record()),
        "forged-replica-records": RepairPush(1, kv, ((KEY, _forged_record()),)),
        "keyspace-lww-n1": GossipSyn((), (KeyspaceDef("kv", policy="lww", n=1),)),
        "expel-a-node": GossipSyn(
            (MemberState("D", victim["zone"], tokens, "left", 2**62, 1, victim["address"]),)
        ),
        "phantom-member": GossipSyn((MemberState("P", "z1", tokens, "normal", 1, 1, "127.0.0.1:9"),)),
        "redirect-an-address": GossipSyn(
            (MemberState("D", victim["zone"], tokens, "normal", victim["generation"], 2**40, "127.0.0.1:9"),)
        ),
    }


# --- who sends them --------------------------------------------------------------------------


def self_signed(directory: Path, node_id: str) -> tuple[Path, Path]:
    """A certificate naming `node_id`, signed by its own key (no cluster CA anywhere near it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, node_id)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(node_id)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "self.crt", directory / "self.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def connect(cluster: ClusterFile, cert: tuple[Path, Path] | None, tls: bool = True) -> socket.socket:
    """A connection to the target node's peer port: plain, or TLS showing `cert` (or none)."""
    entry = cluster.node(TARGET)
    sock = socket.create_connection((entry.host, entry.port), timeout=5)
    if not tls:
        return sock
    ctx = ssl.create_default_context(cafile=str(Path(cluster.dir) / pki.TLS_DIR / pki.CA_CERT))
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    return ctx.wrap_socket(sock, server_hostname=TARGET)


def node_cert(cluster: ClusterFile, node: str) -> tuple[Path, Path]:
    data_dir = Path(cluster.node(node).data_dir)
    if not data_dir.exists():  # a node that left: its directory is set aside, certificate kept
        data_dir = data_dir.with_name(data_dir.name + LEFT_SUFFIX)
    files = pki.NodeTls.in_dir(data_dir / pki.TLS_DIR)
    return files.cert, files.key


def send_as(sock: socket.socket, hello_id: str, msg: Any) -> bool:
    """Send a peer hello and one message; True if the node closed the connection on us."""
    try:
        sock.sendall(encode_frame({"hello": "peer", "id": hello_id}) + encode_frame(to_wire(msg)))
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True  # refused during the handshake already
    return closed_by_node(sock, within=4.0)


# --- what must not change --------------------------------------------------------------------

_MEMBER_FIELDS = ("id", "zone", "generation", "status", "tokens", "address")


def state(cluster: ClusterFile) -> dict[str, Any]:
    """Every running node's records, keyspaces and membership, and every data file's contents."""
    seen: dict[str, Any] = {}
    for node in ("A", "B", "C", "D"):
        info = rpc(cluster, node, "info", counts=False)
        seen[node] = {
            "records": sorted(map(tuple, rpc(cluster, node, "digest"))),
            "keyspaces": sorted((k["name"], k["policy"], k["n"]) for k in info["keyspaces"]),
            "members": sorted(tuple(m[f] for f in _MEMBER_FIELDS) for m in rpc(cluster, node, "members")),
        }
        data = Path(cluster.node(node).data_dir)
        seen[node]["files"] = {
            str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(data.rglob("*"))
            if p.is_file()
        }
    return seen


def rejections(cluster: ClusterFile) -> dict[str, int]:
    return dict(rpc(cluster, TARGET, "info", counts=False)["peer_rejections"])


CREDENTIALS = ["no-tls", "self-signed", "other-node-as-C", "decommissioned"]
EXPECTED_REASON = {
    "no-tls": "handshake",
    "self-signed": "handshake",
    "other-node-as-C": "identity",
    "decommissioned": "decommissioned",
}


def test_outsiders_are_refused_and_nothing_changes(cluster: ClusterFile, tmp_path: Path) -> None:
    wait_for(lambda: _member(cluster, GONE)["status"] == "left", 10, "A to see E as left")
    before = state(cluster)
    forged_cert = self_signed(tmp_path / "rogue", IMPERSONATED)
    refused: list[str] = []
    for credential in CREDENTIALS:
        for name, msg in attacks(cluster).items():
            counts = rejections(cluster)
            if credential == "no-tls":
                sock, hello = connect(cluster, None, tls=False), MEMBER
            elif credential == "self-signed":
                sock, hello = connect(cluster, forged_cert), IMPERSONATED
            elif credential == "other-node-as-C":
                sock, hello = connect(cluster, node_cert(cluster, MEMBER)), IMPERSONATED
            else:
                sock, hello = connect(cluster, node_cert(cluster, GONE)), GONE
            with sock:
                assert send_as(sock, hello, msg), f"{name} with {credential}: the node kept listening"
            reason = EXPECTED_REASON[credential]
            assert rejections(cluster)[reason] == counts[reason] + 1, (name, credential)
            refused.append(f"{credential}/{name}")
    assert len(refused) == len(CREDENTIALS) * 6

    # A member's own certificate, speaking in another node's name inside a message.
    counts = rejections(cluster)
    joiner = MemberState(IMPERSONATED, "z3", (1, 2, 3), "joining", 99, 1, "127.0.0.1:9")
    with connect(cluster, node_cert(cluster, MEMBER)) as sock:
        assert send_as(sock, MEMBER, StreamRequest(1, joiner))
    assert rejections(cluster)["sender"] == counts["sender"] + 1

    assert state(cluster) == before

    # The comparison is not blind: a real member relaying the phantom's state does change the
    # membership, once the state is sealed by the phantom itself with a certificate of the CA
    # (gossip takes a member's state second-hand only so: tests/e2e/test_authorship.py).
    ca_dir = Path(cluster.dir) / pki.TLS_DIR
    files = pki.issue_node(ca_dir, "P", ["127.0.0.1"], tmp_path / "p-tls")
    phantom = SignedAuthorship(files.ca_cert.read_bytes(), files.cert.read_bytes(), files.key.read_bytes())
    (state_of_p,) = attacks(cluster)["phantom-member"].members
    with connect(cluster, node_cert(cluster, MEMBER)) as sock:
        sock.sendall(
            encode_frame({"hello": "peer", "id": MEMBER, "protocol": 5})
            + encode_frame(to_wire(GossipSyn((phantom.seal_member(state_of_p),))))
        )
        wait_for(lambda: any(m["id"] == "P" for m in rpc(cluster, TARGET, "members")), 10, "A to learn of P")
    assert state(cluster) != before


def test_outsider_clients_without_a_valid_token_change_nothing(cluster: ClusterFile, tmp_path: Path) -> None:
    """The client side of the same port: anyone may open TLS to it, but without a valid token no
    write, keyspace change, decommission, fault, shutdown or snapshot gets through."""

    def member_ids(node: str) -> frozenset[str]:
        return frozenset(m["id"] for m in rpc(cluster, node, "members"))

    # Whatever an earlier test taught one node (the phantom of its positive control) has spread.
    wait_for(lambda: len({member_ids(n) for n in "ABCD"}) == 1, 15, "the members' views to agree")
    before = state(cluster)
    entry = cluster.node(TARGET)
    ca = Path(cluster.dir) / pki.TLS_DIR / pki.CA_CERT
    requests = {
        "write-a-key": PutRequest(1, "kv", KEY, b'"owned"', JSON, None),
        "keyspace-lww-n1": KeyspaceRequest(2, KeyspaceDef("kv", policy="lww", n=1)),
        "decommission": DecommissionRequest(3),
    }
    admin: dict[str, dict[str, Any]] = {
        "partition": {"groups": [[TARGET]], "nodes": list(cluster.names)},
        "delay": {"delays": {TARGET: 500.0}},
        "shutdown": {},
        "snapshot": {"snapshot": str(tmp_path / "stolen")},
        "compact": {},
    }

    def code_of(token: str | None, op: str, **args: Any) -> str:
        access = ClientAccess(ca, token)
        try:
            body = trio.run(lambda: rpc_once(entry.host, entry.port, op, 3.0, TARGET, access, **args))
        except RpcError as exc:
            return exc.code or str(exc)
        return str(body.get("code", "")) if isinstance(body, dict) else ""  # a refused request: Failure

    tried = 0
    for token in (None, "bht_000000000000_forged", "not a token at all"):
        for name, request in requests.items():
            assert code_of(token, "request", msg=to_wire(request)) == "unauthenticated", (token, name)
            tried += 1
        for op, args in admin.items():
            assert code_of(token, op, **args) == "unauthenticated", (token, op)
            tried += 1
    assert tried == 3 * (len(requests) + len(admin))
    assert state(cluster) == before
    assert pids.pid_alive(entry.pid) and not (tmp_path / "stolen").exists()
    assert rpc(cluster, TARGET, "info", counts=False)["partitions"] == []
