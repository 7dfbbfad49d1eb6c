"""Who may say what, checked with the cluster CA (security/signed_authorship.py), and gossip applying it.

Each forgery a member with a valid certificate could send is refused by the check, and the same
fact said by its author is taken: a state sealed by its member (relayed by anyone), an unsealed
state only first-hand, a token record or removal only with an issuer's seal.
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from pathlib import Path
from random import Random

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bhandar_cli.core.membership.authorship import Removal
from bhandar_cli.core.membership.gossip import GossipAck, GossipLiveness, GossipSyn, GossipTokens
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.model.access_tokens import TokenTable
from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.model.errors import Refused
from bhandar_cli.core.model.keyspaces import Keyspaces
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.protocol.messages import Note, Send
from bhandar_cli.security import pki
from bhandar_cli.security.auth import mint
from bhandar_cli.security.signed_authorship import SignedAuthorship


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ca_dir = tmp_path_factory.mktemp("ca")
    pki.create_ca(ca_dir, "test")
    return ca_dir


def node(ca: Path, node_id: str, issuer: bool = False) -> SignedAuthorship:
    files = pki.issue_node(ca, node_id, ["127.0.0.1"], ca / f"node-{node_id}")
    key = (ca / pki.CA_KEY).read_bytes() if issuer else None
    return SignedAuthorship(files.ca_cert.read_bytes(), files.cert.read_bytes(), files.key.read_bytes(), key)


def state(node_id: str, heartbeat: int = 1, address: str = "127.0.0.1:7000") -> MemberState:
    return MemberState(node_id, "z1", (1, 2), "normal", 1, heartbeat, address)


def test_a_state_sealed_by_its_member_is_taken_from_anyone_and_nothing_else_is(ca: Path) -> None:
    a, b, f = node(ca, "A"), node(ca, "B"), node(ca, "F")
    sealed_b = b.seal_member(state("B"))
    assert a.admits_member(sealed_b, "F") is None  # relayed by anyone: B said it
    assert a.admits_member(state("B"), "B") is None  # unsealed, first-hand
    assert "unsealed state relayed by F" in (a.admits_member(state("B"), "F") or "")
    # F seals B's state with its own certificate; or changes a sealed state of B's.
    assert "certificate of F" in (a.admits_member(f.seal_member(state("B")), "F") or "")
    redirected = replace(sealed_b, address="127.0.0.1:9")
    assert "does not match" in (a.admits_member(redirected, "F") or "")
    expelled = replace(sealed_b, status="left", generation=2**62)
    assert "does not match" in (a.admits_member(expelled, "F") or "")
    # A certificate of another CA naming B.
    other_ca = ca.parent / "other-ca"
    pki.create_ca(other_ca, "other")
    stranger = node(other_ca, "B")
    assert "did not issue" in (a.admits_member(stranger.seal_member(state("B")), "F") or "")


def test_an_expired_member_certificate_seals_nothing(ca: Path, tmp_path: Path) -> None:
    ca_key = serialization.load_pem_private_key((ca / pki.CA_KEY).read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_cert = x509.load_pem_x509_certificate((ca / pki.CA_CERT).read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "B")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=10))
        .not_valid_after(now - datetime.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    old = SignedAuthorship(
        (ca / pki.CA_CERT).read_bytes(), cert.public_bytes(serialization.Encoding.PEM), key_pem
    )
    assert "expired" in (node(ca, "A").admits_member(old.seal_member(state("B")), "F") or "")


def test_only_an_issuer_seals_tokens_and_removals_and_a_forged_seal_is_refused(ca: Path) -> None:
    a, issuer = node(ca, "A"), node(ca, "I", issuer=True)
    _, record = mint({"*": "admin"}, 0.0, 0, 1.0)
    with pytest.raises(Refused, match="holds no CA key"):
        a.seal_token(record)
    with pytest.raises(Refused, match="holds no CA key"):
        a.seal_removal(Removal("D", 1.0))
    sealed = issuer.seal_token(record)
    assert a.admits_token(sealed) is None
    assert "not sealed" in (a.admits_token(record) or "")
    assert "not an issuer's" in (a.admits_token(replace(sealed, revoked=True)) or "")
    assert "not an issuer's" in (
        a.admits_token(replace(sealed, grants=(("*", "admin"), ("x", "read")))) or ""
    )
    removal = issuer.seal_removal(Removal("D", 1.0))
    assert a.admits_removal(removal) is None
    assert "not an issuer's" in (a.admits_removal(replace(removal, node="B")) or "")
    assert "not sealed" in (a.admits_removal(Removal("D", 1.0)) or "")


def gossip(authority: SignedAuthorship, me: str, known: list[MemberState]) -> GossipLiveness:
    tokens = TokenTable(MemoryStore(), authority)
    return GossipLiveness(state(me), known, [], 0.0, Random(1), client_tokens=tokens, authority=authority)


def test_gossip_merges_only_what_its_authors_said_and_counts_the_rest(ca: Path) -> None:
    a, b, issuer = node(ca, "A"), node(ca, "B"), node(ca, "I", issuer=True)
    g = gossip(a, "A", [state("B"), state("C")])
    _, record = mint({"*": "admin"}, 0.0, 0, 1.0)
    forged_c = state("C", heartbeat=50, address="127.0.0.1:9")
    out = g.handle(1.0, "F", GossipSyn((forged_c,), removals=(Removal("B", 1.0, b"junk"),))) or []
    out += g.handle(1.1, "F", GossipTokens((record,))) or []
    out += g.handle(1.2, "F", GossipTokens((record,))) or []  # noted once, counted twice
    assert g.membership.members["C"].address == "127.0.0.1:7000"
    assert g.membership.status_of("B") == "normal" and g.client_tokens is not None
    assert g.client_tokens.get(record.id) is None
    assert g.refused == {"member": 1, "removal": 1, "token": 2}
    notes = [e.text for e in out if isinstance(e, Note) and "refused gossip from F" in e.text]
    assert len(notes) == 3
    # The same facts from their authors: B's sealed state relayed by F, an issuer's token and
    # removal relayed by F.
    g.handle(2.0, "F", GossipAck((b.seal_member(state("B", heartbeat=9)),)))
    assert g.membership.members["B"].heartbeat == 9
    g.handle(2.1, "F", GossipTokens((issuer.seal_token(record),)))
    assert g.client_tokens.get(record.id) is not None
    g.handle(2.2, "F", GossipSyn((), removals=(issuer.seal_removal(Removal("C", 2.0)),)))
    assert g.membership.status_of("C") == "left"
    # A removed member's own sealed states are never taken again.
    g.handle(2.3, "C", GossipSyn((node(ca, "C").seal_member(state("C", heartbeat=99)),)))
    assert g.membership.status_of("C") == "left"


def test_a_node_seals_its_own_state_once_per_version(ca: Path) -> None:
    g = gossip(node(ca, "A"), "A", [state("B")])
    first = {s.id: s for s in g.digest()}["A"]
    assert first.seal and first.cert and g.digest() == g.digest()  # the same seal, not a new one
    g.tick(10.0)  # a new heartbeat: a new seal
    second = {s.id: s for s in g.digest()}["A"]
    assert second.heartbeat == first.heartbeat + 1 and second.seal != first.seal
    assert node(ca, "B").admits_member(second, "C") is None


def test_an_ack_carries_the_nodes_own_state_sealed_and_a_third_node_takes_it(ca: Path) -> None:
    """A's answer to a syn that lacks A's state holds A's state sealed, as its syns do: an ack
    that carried it unsealed was taken by B (first-hand) and refused by everyone B relayed it to
    ("an unsealed state relayed by B", in every soak's logs)."""
    g = gossip(node(ca, "A"), "A", [state("B")])
    out = g.handle(1.0, "B", GossipSyn((state("B"),))) or []
    acks = [e.msg for e in out if isinstance(e, Send) and isinstance(e.msg, GossipAck)]
    mine = [s for s in acks[0].members if s.id == "A"]
    assert mine and mine[0].seal and mine[0].cert
    assert node(ca, "C").admits_member(mine[0], "B") is None  # relayed by B: A said it


def test_a_known_keyspace_changes_only_for_a_definition_an_issuer_sealed(ca: Path) -> None:
    a, issuer = node(ca, "A"), node(ca, "I", issuer=True)
    store = MemoryStore()
    keyspaces = Keyspaces(store, 3, a)
    lww_n1 = KeyspaceDef("kv", policy="lww", n=1)
    keyspaces.learn(lww_n1)  # a member's replica message, or gossip: unsealed
    keyspaces.learn_all((lww_n1,), (("kv", b"\x30" * 70),))  # with a seal that is not an issuer's
    keyspaces.learn_all((lww_n1,), "not seals at all")  # malformed: as unsealed
    assert keyspaces["kv"].policy == "siblings" and keyspaces.refused == 3
    keyspaces.learn(KeyspaceDef("fresh", n=2))  # a name never heard of: from anyone
    assert keyspaces["fresh"].n == 2
    # An issuer's definition replaces the unsealed one, and then only another sealed one could.
    sealed = KeyspaceDef("fresh", n=3)
    keyspaces.learn_all((sealed,), (("fresh", issuer.seal_keyspace(sealed)),))
    keyspaces.learn(KeyspaceDef("fresh", n=1))
    assert keyspaces["fresh"].n == 3 and dict(keyspaces.seals())["fresh"]
    # The seal is kept with the definition: a restart refuses the same forgery.
    again = Keyspaces(store, 3, a)
    again.learn(KeyspaceDef("fresh", n=1))
    assert again["fresh"].n == 3 and again.refused == 1
    # A node that cannot seal creates keyspaces unsealed; an issuer seals what it creates.
    assert a.seal_keyspace(sealed) == b""
    made = Keyspaces(MemoryStore(), 3, issuer)
    assert (
        made.create(KeyspaceDef("x")) and issuer.admits_keyspace(made["x"], dict(made.seals())["x"]) is None
    )
