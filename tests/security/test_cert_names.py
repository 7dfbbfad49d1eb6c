"""No certificate of a cluster CA can pass as another node: whoever asks (`cluster up`, `cluster
cert`, `cluster add`, the join desk), a node certificate names its own id and hosts that are IP
addresses or host names that are no node's id in any case, and an id is never another's in
another case nor a host name an earlier certificate carries (security/pki.py `certificate_names`).

Why it matters: a client reaching node B checks the certificate for server name `B`, and TLS
compares names without regard to case, so a certificate carrying DNS:B, or DNS:b, is B's to the
client (the CLI handed such a node the cluster's admin token)."""

from __future__ import annotations

import json
import os
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from bhandar_cli.security import pki
from tests.e2e.conftest import run_cli


def sans(files: pki.NodeTls) -> set[str]:
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {f"DNS:{n}" for n in san.get_values_for_type(x509.DNSName)} | {
        f"IP:{a}" for a in san.get_values_for_type(x509.IPAddress)
    }


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    """A CA that has signed A (on 127.0.0.1) and B (on the host name lab-b.example)."""
    ca_dir = tmp_path / "tls"
    pki.create_ca(ca_dir, "test")
    assert sans(pki.issue_node(ca_dir, "A", ["127.0.0.1"], tmp_path / "A")) == {"DNS:A", "IP:127.0.0.1"}
    assert sans(pki.issue_node(ca_dir, "B", ["lab-b.example"], tmp_path / "B")) == {
        "DNS:B",
        "DNS:lab-b.example",
    }
    return ca_dir


@pytest.mark.parametrize(
    ("node_id", "hosts", "known", "says"),
    [
        ("C", ["A"], [], "host A is a node id"),
        ("C", ["127.0.0.3", "b"], [], "host b is a node id"),  # B in another case
        ("C", ["c"], [], "own id spelled differently"),
        ("C", ["z"], ["Z"], "host z is a node id"),  # an id only the caller knows (a member)
        ("C", ["*.example"], [], "neither an IP address nor a host name"),
        ("b", ["127.0.0.3"], [], "node B's spelled in another case"),
        ("z", ["127.0.0.3"], ["Z"], "node Z's spelled in another case"),
        ("LAB-B.example", ["127.0.0.3"], [], "host name in a certificate already signed"),
        ("127.0.0.1", ["127.0.0.3"], [], "is an IP address"),  # a client asking for it takes A's
        ("a b", ["127.0.0.3"], [], "bad node id"),
    ],
)
def test_no_certificate_names_another_nodes_id_in_any_case(
    ca: Path, tmp_path: Path, node_id: str, hosts: list[str], known: list[str], says: str
) -> None:
    with pytest.raises(pki.NameRefused, match=says):
        pki.issue_node(ca, node_id, hosts, tmp_path / "new", known)
    assert not (tmp_path / "new").exists()  # refused before anything was written
    assert pki.signed_names(ca) == pki.SignedNames(frozenset({"A", "B"}), frozenset({"lab-b.example"}))


def test_an_id_is_signed_again_with_the_same_names_and_repeats_collapse(ca: Path, tmp_path: Path) -> None:
    again = pki.issue_node(ca, "A", ["127.0.0.1", "A", "127.0.0.1"], tmp_path / "A2")
    assert sans(again) == {"DNS:A", "IP:127.0.0.1"}
    made = pki.issue_node(ca, "C", ["::1", "c-host.example"], tmp_path / "C", ["A", "B"])
    assert sans(made) == {"DNS:C", "IP:::1", "DNS:c-host.example"}
    record = json.loads((ca / pki.CA_NAMES).read_text())
    assert record == {"ids": ["A", "B", "C"], "hosts": ["c-host.example", "lab-b.example"]}
    assert os.stat(ca / pki.CA_NAMES).st_mode & 0o777 == 0o600


def test_a_certificate_for_b_in_another_case_would_have_passed_as_b(ca: Path, tmp_path: Path) -> None:
    """What the rule stops: ssl takes a certificate for DNS:b as B's. A CA without the rule (the
    signing step alone) makes one; the CA refuses to."""
    key_pem, csr_pem = pki.make_csr("b")
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / "node.key").write_bytes(key_pem)
    (forged / "node.crt").write_bytes(pki._sign(ca, csr_pem, "b", []))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(forged / "node.crt", forged / "node.key")
    client = ssl.create_default_context(cafile=str(ca / pki.CA_CERT))
    assert client.check_hostname
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    talk = client.wrap_bio(to_client, to_server, server_hostname="B")
    serve = server.wrap_bio(to_server, to_client, server_side=True)
    done: set[ssl.SSLObject] = set()
    for _ in range(10):  # a handshake over memory takes a few rounds; a refusal raises SSLError
        for side in (talk, serve):
            try:
                side.do_handshake()
                done.add(side)
            except ssl.SSLWantReadError:
                pass
    assert done == {talk, serve}
    assert pki.peer_node_id(talk) == "b"  # the client asked for B and took b's certificate
    with pytest.raises(pki.NameRefused, match="spelled in another case"):
        pki.sign_node_csr(ca, csr_pem, "b", [])


def test_an_unreadable_record_of_signed_names_stops_signing(ca: Path, tmp_path: Path) -> None:
    (ca / pki.CA_NAMES).write_text("{not json")
    with pytest.raises(pki.PkiError, match=r"record of signed names .* is unreadable"):
        pki.issue_node(ca, "C", ["127.0.0.3"], tmp_path / "C")


def test_cluster_cert_refuses_a_host_that_is_another_nodes_id_in_one_line(tmp_path: Path) -> None:
    directory, out_a, out_b = (str(tmp_path / name) for name in ("c", "a", "b"))
    assert run_cli("cluster", "init", "--dir", directory).returncode == 0
    made = run_cli("cluster", "cert", "A", "--host", "127.0.0.1", "--out", out_a, "--dir", directory)
    assert made.returncode == 0, made.stderr
    for node, host, says in [
        ("B", "a", "host a is a node id"),
        ("a", "127.0.0.2", "node A's spelled in another case"),
    ]:
        refused = run_cli("cluster", "cert", node, "--host", host, "--out", out_b, "--dir", directory)
        assert refused.returncode == 1, refused.stderr
        (line,) = refused.stderr.decode().strip().splitlines()
        assert says in line, line
        assert not (tmp_path / "b").exists()
