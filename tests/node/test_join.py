"""Join tokens and the join exchange (security/join_tokens.py, node/join.py) over real TLS on 127.0.0.1.

The issuing side here is a `JoinDesk` behind a small TLS listener shaped like the node's (server
certificate of node A, client certificate optional, a join hello routed to the desk); the process
cluster test (tests/e2e/test_multihost.py) runs the same exchange through `bhandar node run --join`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from bhandar_cli.core.model.config import NODE_ID
from bhandar_cli.node import join as join_module
from bhandar_cli.node.join import JoinDesk, JoinUnreachable, join_once, redeem
from bhandar_cli.node.net.frames import FrameConn
from bhandar_cli.security import pki
from bhandar_cli.security.join_tokens import JoinRefused, JoinToken, JoinTokens, parse_ttl

DEADLINE = 20.0


class Issuer:
    """A cluster CA and node A's identity, with A's join desk (tokens in A's data directory)."""

    def __init__(self, root: Path, known: set[str] | None = None, can_sign: bool = True) -> None:
        self.ca_dir = root / "cluster" / "tls"
        pki.create_ca(self.ca_dir, "test")
        self.node_tls = pki.issue_node(self.ca_dir, "A", ["127.0.0.1"], root / "A" / "tls")
        self.data_dir = root / "A"
        self.known = known if known is not None else {"A", "B"}
        self.port = 0
        self.desk = JoinDesk(
            JoinTokens(self.data_dir),
            self.ca_dir if can_sign else None,
            lambda: f"127.0.0.1:{self.port}",
            lambda: self.known,
        )
        self.requests: list[Any] = []  # what joiners sent, to show what did and did not travel
        grant = self.desk.grant

        def recording_grant(request: Any) -> bytes:
            self.requests.append(request)
            return grant(request)

        self.desk.grant = recording_grant  # type: ignore[method-assign]

    @property
    def ca_pem(self) -> bytes:
        return (self.ca_dir / pki.CA_CERT).read_bytes()


@asynccontextmanager
async def listening(issuer: Issuer, identity: pki.NodeTls | None = None) -> AsyncIterator[int]:
    """Serve join hellos over TLS with node A's certificate (or `identity`'s) until the block ends."""
    ctx = pki.server_context(identity or issuer.node_tls)

    async def handle(tcp: trio.SocketStream) -> None:
        stream = trio.SSLStream(tcp, ctx, server_side=True)
        try:
            conn = FrameConn(stream)
            hello = await conn.receive()
            assert hello == {"hello": "join"}
            await issuer.desk.serve(conn)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the joiner hung up (it refused our CA)
        finally:
            await trio.aclose_forcefully(stream)

    error: list[Exception] = []  # raised bare after the nursery, not wrapped in its group
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        issuer.port = listeners[0].socket.getsockname()[1]
        try:
            yield issuer.port
        except Exception as exc:
            error.append(exc)
        nursery.cancel_scope.cancel()
    if error:
        raise error[0]


def run(body: Callable[[], Any]) -> Any:
    async def bounded() -> Any:
        with trio.fail_after(DEADLINE):
            return await body()

    return trio.run(bounded)


def join(issuer: Issuer, token: JoinToken, node_id: str, tls_dir: Path) -> pki.NodeTls:
    async def body() -> pki.NodeTls:
        async with listening(issuer) as port:
            return await redeem(token, ("127.0.0.1", port), node_id, ["127.0.0.9"], tls_dir)

    return run(body)  # type: ignore[no-any-return]


def mint(issuer: Issuer, ttl: float = 900.0) -> JoinToken:
    issuer.port = 7000  # the address a token names; the test listener's port is random
    return issuer.desk.mint(ttl)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# --- the token ----------------------------------------------------------------------------------


def test_a_token_prints_and_parses_back_also_with_dots_and_colons_in_its_address() -> None:
    for address in ("127.0.0.2:7001", "node-a.lab.example:7001", "[::1]:7001"):
        token = JoinToken(address, 1_900_000_000, "ab" * 16, "cd" * 32)
        assert JoinToken.parse(f"  {token}\n") == token
    assert JoinToken.parse("bhj1.[::1]:7001.1.{}.{}".format("a" * 32, "b" * 64)).host_port == ("::1", 7001)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("xyz1.127.0.0.1:7000.1." + "a" * 32 + "." + "b" * 64, "not a join token"),
        ("bhj1.127.0.0.1.1." + "a" * 32 + "." + "b" * 64, "HOST:PORT"),
        ("bhj1.127.0.0.1:7000.soon." + "a" * 32 + "." + "b" * 64, "expiry"),
        ("bhj1.127.0.0.1:7000.1." + "a" * 31 + "." + "b" * 64, "secret"),
        ("bhj1.127.0.0.1:7000.1." + "a" * 32 + "." + "b" * 63, "CA pin"),
        ("bhj1." + "a" * 32, "malformed"),
    ],
)
def test_a_malformed_token_is_refused_saying_which_part_is_wrong(text: str, says: str) -> None:
    with pytest.raises(JoinRefused, match=says):
        JoinToken.parse(text)


def test_lifetimes_read_as_an_operator_writes_them() -> None:
    assert [parse_ttl(t) for t in ("90", "90s", "15m", "2h", "1d", "1.5m")] == [90, 90, 900, 7200, 86400, 90]
    for bad in ("", "0", "-5m", "15 minutes", "8d"):
        with pytest.raises(ValueError):
            parse_ttl(bad)


def test_a_token_is_single_use_across_restarts_and_only_its_hash_is_kept(tmp_path: Path) -> None:
    book = JoinTokens(tmp_path)
    token = book.mint("127.0.0.1:7000", "cd" * 32, now=1000.0, ttl=60)
    assert token.expires == 1060
    kept = (tmp_path / "join-tokens.json").read_text()
    assert token.secret not in kept and mode(tmp_path / "join-tokens.json") == 0o600
    JoinTokens(tmp_path).redeem(token.secret, now=1001.0)  # a restarted node still knows it
    with pytest.raises(JoinRefused, match="already used"):
        JoinTokens(tmp_path).redeem(token.secret, now=1002.0)  # ... and that it was used


def test_an_expired_token_is_refused_and_spent(tmp_path: Path) -> None:
    book = JoinTokens(tmp_path)
    token = book.mint("127.0.0.1:7000", "cd" * 32, now=1000.0, ttl=60)
    with pytest.raises(JoinRefused, match="expired"):
        book.redeem(token.secret, now=1060.0)
    with pytest.raises(JoinRefused, match="already used"):
        book.redeem(token.secret, now=1000.0)


# --- the exchange -------------------------------------------------------------------------------


def test_a_good_token_gets_the_joiner_a_certificate_for_its_id_and_the_key_never_travels(
    tmp_path: Path,
) -> None:
    issuer = Issuer(tmp_path)
    tls_dir = tmp_path / "F" / "tls"
    files = join(issuer, mint(issuer), "F", tls_dir)
    assert files.exists() and mode(tls_dir) == 0o700
    assert {mode(p) for p in (files.ca_cert, files.cert, files.key)} == {0o600}
    assert files.ca_cert.read_bytes() == issuer.ca_pem
    cert_pem = files.cert.read_bytes()
    assert pki.issued_by(cert_pem, issuer.ca_pem)
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "F"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "F" in san.get_values_for_type(x509.DNSName)
    key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    assert key.public_key().public_bytes(der, public) == cert.public_key().public_bytes(der, public)
    (request,) = issuer.requests
    assert "PRIVATE KEY" not in repr(request)
    pki.server_context(files)  # the written identity is one a node can serve with
    assert issuer.desk.tokens.issued == {"F"}


def test_a_used_token_is_refused_the_second_time(tmp_path: Path) -> None:
    issuer = Issuer(tmp_path)
    token = mint(issuer)
    join(issuer, token, "F", tmp_path / "F" / "tls")
    with pytest.raises(JoinRefused, match="already used"):
        join(issuer, token, "G", tmp_path / "G" / "tls")
    assert not (tmp_path / "G" / "tls").exists()


@pytest.mark.parametrize(
    ("node_id", "says"),
    [("B", "taken"), ("gone", "taken"), ("bad id!", "bad node id"), ("F", "earlier join")],
)
def test_an_id_in_use_or_ever_used_is_refused_and_does_not_spend_the_token(
    tmp_path: Path, node_id: str, says: str
) -> None:
    issuer = Issuer(tmp_path, known={"A", "B", "gone"})  # "gone": decommissioned, still known
    issuer.desk.tokens.record_issued("F")
    token = mint(issuer)
    with pytest.raises(JoinRefused, match=says):
        join(issuer, token, node_id, tmp_path / "X" / "tls")
    assert join(issuer, token, "G", tmp_path / "G" / "tls").exists()


@pytest.mark.parametrize(
    ("node_id", "csr"),
    [("B", None), ("gone", None), ("F", None), ("bad id!", None), ("H", "not a CSR")],
    ids=["member", "decommissioned", "issued", "malformed", "broken-csr"],
)
@pytest.mark.parametrize("token", ["never-minted", "expired"])
def test_without_a_good_token_the_desk_says_nothing_about_the_id_and_signs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node_id: str, csr: str | None, token: str
) -> None:
    """An attacker holding no token (or a dead one) learns from the desk only that the token is
    no good: not which ids are taken or were ever used, nor whether its request would be signed."""
    issuer = Issuer(tmp_path, known={"A", "B", "gone"})
    issuer.desk.tokens.record_issued("F")
    signed: list[str] = []
    sign = pki.sign_node_csr

    def recording_sign(ca_dir: Path, csr_pem: bytes, node: str, hosts: list[str], known: Any = ()) -> bytes:
        signed.append(node)
        return sign(ca_dir, csr_pem, node, hosts, known)

    monkeypatch.setattr(join_module, "sign_node_csr", recording_sign)  # where the desk looks it up
    if token == "expired":
        now = [1_000_000.0]
        issuer.desk.clock = lambda: now[0]
        presented = mint(issuer, ttl=60.0)
        now[0] += 61.0
        says = "expired"
    else:
        presented = replace(mint(issuer), secret="ab" * 16)  # the node's CA, a secret it never made
        says = "unknown or already used"
    _, csr_pem = pki.make_csr(node_id if NODE_ID.fullmatch(node_id) else "X")
    request = {"token": str(presented), "id": node_id, "csr": csr or csr_pem.decode(), "hosts": ["h"]}
    with pytest.raises(JoinRefused) as refused:
        issuer.desk.grant(request)
    assert says in str(refused.value) and node_id not in str(refused.value), refused.value
    assert "csr" not in str(refused.value).lower() and "signing" not in str(refused.value)
    assert signed == []


def sans(cert_pem: bytes) -> set[str]:
    """The subject alternative names of a certificate, as `DNS:name` and `IP:address`."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {f"DNS:{n}" for n in san.get_values_for_type(x509.DNSName)} | {
        f"IP:{a}" for a in san.get_values_for_type(x509.IPAddress)
    }


def ask(issuer: Issuer, token: JoinToken, node_id: str, hosts: Any) -> bytes:
    """The desk's answer to a join request of the joiner's own making (a modified joiner can send
    any hosts it likes): the certificate, or JoinRefused."""
    _, csr_pem = pki.make_csr(node_id)
    return issuer.desk.grant({"token": str(token), "id": node_id, "csr": csr_pem.decode(), "hosts": hosts})


@pytest.mark.parametrize(
    ("hosts", "says"),
    [
        (["A", "B", "C"], "must name one host"),  # the finding: DNS:A, DNS:B, DNS:C were signed
        (["127.0.0.9", "A"], "must name one host"),
        (["A"], "host A is a node id"),
        (["b"], "host b is a node id"),  # B in another case: ssl matches names without regard to case
        (["gone"], "host gone is a node id"),  # decommissioned, still an id clients may ask for
        (["Issued"], "host Issued is a node id"),  # an id an earlier join was given
        (["f"], "own id spelled differently"),
        (["*"], "neither an IP address nor a host name"),
        (["*.lab"], "neither an IP address nor a host name"),
        ([], "must name one host"),
        ("127.0.0.9", "must name one host"),
    ],
)
def test_a_join_request_naming_other_nodes_or_several_hosts_is_refused_and_spends_nothing(
    tmp_path: Path, hosts: Any, says: str
) -> None:
    issuer = Issuer(tmp_path, known={"A", "B", "gone"})
    issuer.desk.tokens.record_issued("issued")
    token = mint(issuer)
    with pytest.raises(JoinRefused, match=says):
        ask(issuer, token, "F", hosts)
    assert issuer.desk.tokens.issued == {"issued"}
    # The same token still admits F, and its certificate names F and the one address asked for.
    assert sans(ask(issuer, token, "F", ["127.0.0.9"])) == {"DNS:F", "IP:127.0.0.9"}


def test_the_certificate_names_the_desks_id_and_the_one_host_never_what_the_csr_asks(
    tmp_path: Path,
) -> None:
    issuer = Issuer(tmp_path)
    _, csr_pem = pki.make_csr("A")  # the CSR's subject says A: the desk signs the id it checked
    cert_pem = issuer.desk.grant(
        {"token": str(mint(issuer)), "id": "F", "csr": csr_pem.decode(), "hosts": ["f-laptop.lab"]}
    )
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["F"]
    assert sans(cert_pem) == {"DNS:F", "DNS:f-laptop.lab"}


@pytest.mark.parametrize(
    ("node_id", "says"),
    [
        ("b", "B, the same in another case, is a member"),
        ("GONE", "gone, the same in another case, is a member"),
        ("f", "earlier join as F"),
        ("F-LAPTOP.lab", "host name in a certificate already signed"),  # F's certificate names it
        ("10.0.0.5", "is an IP address"),
    ],
)
def test_ids_are_unique_without_regard_to_case_and_never_a_name_another_certificate_carries(
    tmp_path: Path, node_id: str, says: str
) -> None:
    """`b` beside `B` would be granted a certificate for DNS:b, which a client asking for B takes
    for B's: TLS compares names without regard to case."""
    issuer = Issuer(tmp_path, known={"A", "B", "gone"})
    ask(issuer, mint(issuer), "F", ["f-laptop.lab"])
    token = mint(issuer)
    with pytest.raises(JoinRefused, match=says):
        ask(issuer, token, node_id, ["127.0.0.9"])
    assert issuer.desk.tokens.issued == {"F"}
    assert sans(ask(issuer, token, "G", ["127.0.0.9"])) == {"DNS:G", "IP:127.0.0.9"}


def test_a_tampered_ca_pin_stops_the_joiner_before_its_token_leaves(tmp_path: Path) -> None:
    issuer = Issuer(tmp_path)
    token = mint(issuer)
    first = "0" if token.ca_fingerprint[0] != "0" else "1"
    tampered = replace(token, ca_fingerprint=first + token.ca_fingerprint[1:])
    with pytest.raises(JoinRefused, match="not the one the token pins"):
        join(issuer, tampered, "F", tmp_path / "F" / "tls")
    assert issuer.requests == []  # nothing was asked: the secret never reached the node
    assert join(issuer, token, "F", tmp_path / "F" / "tls").exists()


def test_a_man_in_the_middle_showing_the_real_ca_with_a_certificate_of_its_own_is_refused(
    tmp_path: Path,
) -> None:
    issuer = Issuer(tmp_path)
    token = mint(issuer)
    evil_ca = tmp_path / "evil" / "tls"
    pki.create_ca(evil_ca, "evil")
    evil = pki.issue_node(evil_ca, "A", ["127.0.0.1"], tmp_path / "evil" / "A")

    async def body() -> None:
        # It can hand out the real CA certificate (it is public), not a certificate signed by it.
        async with listening(issuer, identity=evil) as port:
            await redeem(token, ("127.0.0.1", port), "F", ["127.0.0.9"], tmp_path / "F" / "tls")

    with pytest.raises(JoinRefused, match="no certificate of the pinned CA"):
        run(body)
    assert issuer.requests == [] and not (tmp_path / "F" / "tls").exists()


def test_a_node_without_the_ca_key_mints_nothing_and_admits_nobody(tmp_path: Path) -> None:
    issuer = Issuer(tmp_path, can_sign=False)
    with pytest.raises(JoinRefused, match="holds no CA key"):
        issuer.desk.mint(900.0)
    token = JoinToken("127.0.0.1:7000", 2_000_000_000, "ab" * 16, pki.fingerprint(issuer.ca_pem))
    with pytest.raises(JoinRefused, match="refused the join: this node holds no CA key"):
        join(issuer, token, "F", tmp_path / "F" / "tls")


def test_an_expired_token_fails_at_once_and_nobody_answering_is_not_a_refusal(tmp_path: Path) -> None:
    token = JoinToken("127.0.0.1:1", 1_000, "ab" * 16, "cd" * 32)
    with pytest.raises(JoinRefused, match="expired"):
        run(lambda: redeem(token, ("127.0.0.1", 1), "F", ["127.0.0.9"], tmp_path / "tls"))
    alive = replace(token, expires=4_000_000_000)
    with pytest.raises(JoinUnreachable, match=r"cannot join through 127\.0\.0\.1:1"):
        run(lambda: redeem(alive, ("127.0.0.1", 1), "F", ["127.0.0.9"], tmp_path / "tls"))


def test_a_rerun_with_a_complete_tls_directory_does_not_join_again_nor_read_the_token(
    tmp_path: Path,
) -> None:
    issuer = Issuer(tmp_path)
    data_dir = tmp_path / "F"
    pki.issue_node(issuer.ca_dir, "F", ["127.0.0.9"], data_dir / "tls")
    # Port 1 answers nobody: reaching the network at all would fail.
    token = JoinToken("127.0.0.1:1", 4_000_000_000, "ab" * 16, "cd" * 32)
    read: list[str] = []

    def token_text() -> str:  # the token file of a restart may be gone: it is read only to join
        read.append(str(token))
        return str(token)

    assert join_once(("127.0.0.1", 1), token_text, "F", "127.0.0.9", str(data_dir)) == data_dir / "tls"
    assert read == []
    os.remove(data_dir / "tls" / pki.CA_CERT)  # a join cut short: it must be tried again
    with pytest.raises(JoinUnreachable):
        join_once(("127.0.0.1", 1), token_text, "F", "127.0.0.9", str(data_dir))
    assert read == [str(token)]
