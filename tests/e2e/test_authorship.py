"""A join token makes a node, not an administrator: gossip facts are taken only from their authors.

A student redeems a real join token (the cluster's own join desk signs a certificate for node F)
and, with that valid certificate, sends the nodes gossip in other authors' names: a token record
minting an admin token, a revocation of the teacher's admin token, node B expelled with a huge
generation, node C's address redirected, a removal of node D, B's state sealed with F's own key,
keyspace kv switched to LWW with N=1 (by gossip and by a schema update).
None takes effect, and each is counted. The same channel does carry what F may say (its own
state) and what an issuer sealed (a token record sealed with the CA key), so the comparison would
catch an accepted forgery. Then `cluster remove F` takes F out without its help: every node
refuses its certificate from then on, a restarted node too.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from bhandar_cli.core.membership.authorship import Removal
from bhandar_cli.core.membership.gossip import GossipSyn, GossipTokens
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.model.access_tokens import TokenRecord
from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.protocol.messages import SchemaUpdate
from bhandar_cli.core.wire import to_wire
from bhandar_cli.fleet.cluster_file import ClusterFile, client_access
from bhandar_cli.node.join import redeem
from bhandar_cli.node.net.blocking_rpc import RpcError
from bhandar_cli.node.net.codec import encode_frame
from bhandar_cli.node.net.rpc import rpc_once
from bhandar_cli.security import pki
from bhandar_cli.security.access import ClientAccess
from bhandar_cli.security.auth import mint
from bhandar_cli.security.join_tokens import JoinToken
from bhandar_cli.security.signed_authorship import SignedAuthorship, issuer_sealed
from tests.e2e.conftest import kill_all, rpc, run_cli, start_cluster, wait_for
from tests.e2e.test_multihost import mint_join_token
from tests.e2e.test_rogue import closed_by_node

TARGETS = ("A", "B", "C")  # the nodes the forgeries are sent to
JOINED = "F"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterFile]:
    directory = tmp_path_factory.mktemp("authorship") / "cluster"
    try:
        started = start_cluster(directory, nodes=4)
        assert started.tls
        yield started
    finally:
        kill_all(directory)


@pytest.fixture(scope="module")
def joined_cert(cluster: ClusterFile, tmp_path_factory: pytest.TempPathFactory) -> pki.NodeTls:
    """A real joined node's certificate: a join token redeemed at the cluster's join desk."""
    token = JoinToken.parse(mint_join_token(cluster)["token"])
    tls_dir = tmp_path_factory.mktemp("joined") / "tls"
    return trio.run(redeem, token, token.host_port, JOINED, ["127.0.0.1"], tls_dir)


def send_as_joined(cluster: ClusterFile, files: pki.NodeTls, node: str, *msgs: Any) -> socket.socket:
    """Open a peer link to `node` with the joined certificate and send `msgs` (protocol 5)."""
    entry = cluster.node(node)
    ctx = pki.client_context(files.ca_cert, files)
    sock = ctx.wrap_socket(
        socket.create_connection((entry.host, entry.port), timeout=5), server_hostname=node
    )
    hello = encode_frame({"hello": "peer", "id": JOINED, "protocol": 5})
    sock.sendall(hello + b"".join(encode_frame(to_wire(m)) for m in msgs))
    return sock


def members(cluster: ClusterFile, node: str) -> dict[str, dict[str, Any]]:
    return {str(m["id"]): m for m in rpc(cluster, node, "members")}


def token_ids(cluster: ClusterFile, node: str) -> dict[str, bool]:
    return {t["id"]: t["revoked"] for t in rpc(cluster, node, "token_list")}


def refused(cluster: ClusterFile, node: str) -> dict[str, int]:
    return dict(rpc(cluster, node, "info", counts=False)["gossip_refused"])


def works(cluster: ClusterFile, node: str, token: str) -> bool:
    """Whether `token` opens an admin view on `node`."""
    entry = cluster.node(node)
    access = ClientAccess(client_access(cluster).ca_cert, token)
    try:
        trio.run(lambda: rpc_once(entry.host, entry.port, "token_list", 3.0, node, access))
    except RpcError:
        return False
    return True


def snapshot(cluster: ClusterFile) -> dict[str, Any]:
    fields = ("status", "generation", "address", "tokens")
    return {
        node: {
            "members": {m: tuple(row[f] for f in fields) for m, row in members(cluster, node).items()},
            "tokens": token_ids(cluster, node),
            "keyspaces": sorted(
                (k["name"], k["policy"], k["n"])
                for k in rpc(cluster, node, "info", counts=False)["keyspaces"]
            ),
        }
        for node in cluster.names
    }


def test_a_joined_certificate_cannot_say_what_only_members_and_issuers_may(
    cluster: ClusterFile, joined_cert: pki.NodeTls, tmp_path: Path
) -> None:
    admin_token = client_access(cluster).token
    assert admin_token is not None and works(cluster, "A", admin_token)
    (admin_record,) = [r for r in rpc(cluster, "A", "token_list")]
    b, c = (members(cluster, "A")[n] for n in "BC")
    forged_token, forged_record = mint({"*": "admin"}, 0.0, 0, 1.0)
    # F seals B's state with its own (valid) key: a seal, but not B's.
    own_key = SignedAuthorship(
        joined_cert.ca_cert.read_bytes(), joined_cert.cert.read_bytes(), joined_cert.key.read_bytes()
    )
    b_state = MemberState("B", b["zone"], (5, 6), "left", b["generation"], 10**9, b["address"])
    forgeries = {
        "mint an admin token": GossipTokens((forged_record,)),
        "revoke the teacher's admin token": GossipTokens(
            (
                TokenRecord(
                    admin_record["id"],
                    "0" * 64,  # the table holds the real digest; a revocation wins whatever it says
                    (("*", "admin"),),
                    created=1.0,
                    revoked=True,
                    seal="ab" * 64,
                ),
            )
        ),
        "expel B for good": GossipSyn((MemberState("B", b["zone"], (1, 2), "left", 2**62, 1, b["address"]),)),
        "redirect C's address": GossipSyn(
            (MemberState("C", c["zone"], (1, 2), "normal", c["generation"], 2**40, "127.0.0.1:9"),)
        ),
        "remove D": GossipSyn((), removals=(Removal("D", 1.0, b"\x30" * 70),)),
        "B's state sealed by F": GossipSyn((own_key.seal_member(b_state),)),
        "switch kv to LWW with N=1 by gossip": GossipSyn((), (KeyspaceDef("kv", policy="lww", n=1),)),
        "... by a schema update": SchemaUpdate((KeyspaceDef("kv", policy="lww", n=1),)),
    }
    before = snapshot(cluster)
    counts = {node: sum(refused(cluster, node).values()) for node in TARGETS}
    for node in TARGETS:
        with send_as_joined(cluster, joined_cert, node, *forgeries.values()) as sock:
            # Each forgery is counted where it arrived (the link stays open: F is a node).
            wait_for(
                lambda node=node: sum(refused(cluster, node).values()) >= counts[node] + len(forgeries),  # type: ignore[misc]
                10,
                f"{node} to refuse {len(forgeries)} forgeries",
            )
            assert not closed_by_node(sock, within=0.2)
    assert snapshot(cluster) == before
    assert works(cluster, "A", admin_token) and not works(cluster, "A", forged_token)
    for node in TARGETS:
        kinds = refused(cluster, node)
        assert kinds.get("token", 0) >= 2 and kinds.get("member", 0) >= 3 and kinds.get("removal", 0) >= 1
        assert kinds.get("keyspace", 0) >= 2

    # Not blind: the same link carries what F may say (its own state, first-hand) and what an
    # issuer sealed (a token record sealed with the CA key, whoever relays it).
    ca_key = (Path(cluster.dir) / pki.TLS_DIR / pki.CA_KEY).read_bytes()
    good_token, good_record = mint({"kv": "read"}, 0.0, 0, 2.0)
    own = MemberState(JOINED, "z1", (), "normal", 1, 1, "127.0.0.1:9")
    with send_as_joined(
        cluster, joined_cert, "A", GossipTokens((issuer_sealed(good_record, ca_key),)), GossipSyn((own,))
    ):
        wait_for(lambda: good_record.id in token_ids(cluster, "A"), 10, "A to take the sealed token")
        wait_for(lambda: JOINED in members(cluster, "A"), 10, "A to take F's own state")
    wait_for(
        lambda: all(good_record.id in token_ids(cluster, n) for n in cluster.names), 15, "the token to spread"
    )
    assert works(cluster, "C", good_token) is False  # a read token is not admin: but it is known
    assert snapshot(cluster) != before


def test_cluster_remove_takes_out_a_node_that_does_not_help_for_good(
    cluster: ClusterFile, joined_cert: pki.NodeTls
) -> None:
    # Only A took F's unsealed state (first-hand); the others refuse it relayed. F is no process
    # of this cluster and answers nothing: it is removed without its help.
    assert JOINED in members(cluster, "A")
    removed = run_cli("cluster", "remove", JOINED, "--dir", cluster.dir)
    assert removed.returncode == 0, removed.stderr.decode()
    assert f"removed {JOINED} (sealed by A" in removed.stdout.decode()
    for node in cluster.names:
        assert members(cluster, node)[JOINED]["status"] == "left"  # known before or not
        assert rpc(cluster, node, "info", counts=False)["removed"] == [JOINED]

    def refuses_f(node: str) -> bool:
        before = rpc(cluster, node, "info", counts=False)["peer_rejections"]["decommissioned"]
        with send_as_joined(cluster, joined_cert, node, GossipSyn(())) as sock:
            closed = closed_by_node(sock, within=4.0)
        after = rpc(cluster, node, "info", counts=False)["peer_rejections"]["decommissioned"]
        return closed and after == before + 1

    assert all(refuses_f(n) for n in cluster.names)
    # ... after a restart too: the removal is kept with the node's data.
    assert run_cli("cluster", "kill", "B", "--dir", cluster.dir).returncode == 0
    assert run_cli("cluster", "start", "B", "--dir", cluster.dir).returncode == 0
    wait_for(lambda: members(cluster, "B")[JOINED]["status"] == "left", 15, "B to come back knowing F left")
    assert refuses_f("B")

    # Asked again, or for a node nobody knows: one line, a non-zero exit.
    unknown = run_cli("cluster", "remove", "Q", "--dir", cluster.dir)
    assert unknown.returncode != 0 and "unknown node 'Q'" in unknown.stderr.decode()


def test_only_an_issuer_seals_a_removal(cluster: ClusterFile) -> None:
    """B holds no CA key: asked directly, it refuses and says who can."""
    entry = cluster.node("B")
    with pytest.raises(RpcError, match="holds no CA key") as refusal:
        trio.run(
            lambda: rpc_once(entry.host, entry.port, "remove", 3.0, "B", client_access(cluster), node="D")
        )
    assert refusal.value.code == "refused"
    assert members(cluster, "A")["D"]["status"] == "normal"
