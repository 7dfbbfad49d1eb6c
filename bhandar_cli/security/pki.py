"""The cluster's certificate authority and each node's TLS identity (the `cryptography` package).

A process cluster has its own CA, made by `cluster up` (or `cluster init`). Every node holds a key
and a certificate signed by that CA whose subject common name and DNS name are its node id (`A`,
`B`, ...), so one `ssl` check proves both "a member of this cluster" and "which one": a client
connecting to node B asks for server name `B`, and a node reading a peer's certificate learns the
peer's id from it. Clients (the CLI, HTTP) hold no certificate: they check the node's with the
CA certificate and show a token (node/auth).

What a certificate names is decided here, for every caller (`cluster up`, `cluster cert`,
`cluster add`, the join desk): DNS:id and CN=id, plus the hosts the caller gives that pass
`certificate_names`. TLS compares names without regard to case and a client asks for server name
= node id, so no certificate may name, in any spelling, an id other than its own: a host must be
an IP literal or a DNS name that is no node's id, and an id must be no earlier certificate's host
nor another id spelled differently. The CA keeps the ids and DNS names it signed in
DIR/tls/names.json, so it remembers them whoever asks next.

Files (all private material 0600, written atomically):

    DIR/tls/ca.crt  ca.key             the CA (ca.key never leaves the operator's machine, except
                                       to nodes that sign joiners' certificates)
    DIR/tls/names.json                 every node id and DNS name the CA has signed
    DATA_DIR/tls/ca.crt node.crt node.key   a node's identity

Keys are ECDSA P-256: a TLS handshake with them costs a fraction of RSA's, and connections are
long-lived anyway.

`cryptography` is imported by the functions that make or read certificates only, and so are
datetime, hashlib and ipaddress: a client that just checks a node's certificate (`client_context`,
ssl alone, in security/ca_trust.py with the TLS files' names and `NodeTls`, re-exported here) starts
some 25 ms sooner.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bhandar_cli.core.model import NODE_ID, NODE_ID_RULE
from bhandar_cli.security.ca_trust import CA_CERT as CA_CERT
from bhandar_cli.security.ca_trust import NODE_CERT as NODE_CERT
from bhandar_cli.security.ca_trust import NODE_KEY as NODE_KEY
from bhandar_cli.security.ca_trust import TLS_DIR as TLS_DIR
from bhandar_cli.security.ca_trust import NodeTls as NodeTls
from bhandar_cli.security.ca_trust import client_context as client_context

if TYPE_CHECKING:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

CA_KEY = "ca.key"
CA_NAMES = "names.json"
CA_YEARS = 10
NODE_YEARS = 5
# A host name as a certificate may carry it: labels of letters, digits, '-' and '_', no wildcard.
DNS_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63})*")


class PkiError(Exception):
    """TLS material is missing or does not fit (the operator's setup, not a bug)."""


class NameRefused(PkiError):
    """A certificate asked to name what would let it pass as another node (the asker's input)."""


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` readable by its owner only (0600), atomically.

    The temporary file has a random name and is made with O_CREAT|O_EXCL|O_NOFOLLOW (`mkstemp`), so
    nothing planted beside `path` (a file or a link to one) is ever written through; its mode is
    set before the first byte; the rename replaces a link planted at `path` instead of following
    it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)


def private_dir(path: Path) -> Path:
    """Make `path` (and missing parents) a directory only its owner can enter (0700)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def _now() -> datetime.datetime:
    import datetime

    return datetime.datetime.now(datetime.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise PkiError(f"cannot read the private key {path}: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PkiError(f"{path} is not an ECDSA key")
    return key


def load_cert(path: Path) -> x509.Certificate:
    from cryptography import x509

    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise PkiError(f"cannot read the certificate {path}: {exc}") from None


def create_ca(tls_dir: Path, cluster_name: str) -> Path:
    """Make a new cluster CA in `tls_dir` (ca.crt, ca.key); returns the certificate's path.

    Refuses to overwrite an existing CA: every node certificate of the cluster hangs off it."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private_dir(tls_dir)
    if (tls_dir / CA_KEY).exists():
        raise PkiError(f"{tls_dir / CA_KEY} exists already; a cluster has one CA")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "bhandar"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"bhandar cluster CA {cluster_name}"[:64]),
        ]
    )
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365 * CA_YEARS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    write_private(tls_dir / CA_KEY, _key_pem(key))
    write_private(tls_dir / CA_CERT, cert.public_bytes(serialization.Encoding.PEM))
    return tls_dir / CA_CERT


def make_csr(node_id: str) -> tuple[bytes, bytes]:
    """A new key and a certificate signing request for `node_id`: (key PEM, CSR PEM).

    A joining node makes these itself, so its private key never travels."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, node_id)]))
        .sign(key, hashes.SHA256())
    )
    return _key_pem(key), csr.public_bytes(serialization.Encoding.PEM)


def _ip(text: str) -> str | None:
    """`text` as an IP address in its normal form, or None if it is not an IP literal."""
    import ipaddress

    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


@dataclass(frozen=True)
class SignedNames:
    """What a CA has put in certificates: node ids and DNS host names (DIR/tls/names.json)."""

    ids: frozenset[str] = frozenset()
    hosts: frozenset[str] = frozenset()


def signed_names(ca_dir: Path) -> SignedNames:
    """The ids and DNS names the CA in `ca_dir` has signed (none before its first certificate)."""
    path = ca_dir / CA_NAMES
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return SignedNames(frozenset(map(str, raw["ids"])), frozenset(map(str, raw["hosts"])))
    except FileNotFoundError:
        return SignedNames()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # Signing without it could put a known id into a new certificate: refuse instead.
        raise PkiError(f"the CA's record of signed names {path} is unreadable ({exc}); restore it") from None


@contextmanager
def _names_locked(ca_dir: Path) -> Iterator[SignedNames]:
    """The CA's signed names, with the CA directory locked: two nodes sharing one CA (`--issuers`)
    cannot both sign a name or lose each other's record."""
    import fcntl

    try:
        fd = os.open(ca_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise PkiError(f"no cluster CA in {ca_dir}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield signed_names(ca_dir)
    finally:
        os.close(fd)  # releases the lock


def certificate_names(
    node_id: str, hosts: Sequence[str], known_ids: Iterable[str], signed: SignedNames = SignedNames()
) -> list[str]:
    """The hosts a certificate for `node_id` may carry besides DNS:`node_id` (normalised, in order,
    without repeats); NameRefused saying why otherwise.

    TLS matches a name without regard to case, and a client reaching node X checks the certificate
    for server name X (an IP-literal X against its IP addresses). So:
    - `node_id` is well formed, not an IP literal, not another known or signed id in another case,
      and not a DNS name an earlier certificate carries;
    - each host is an IP literal, or a DNS name (no wildcard) that is, in any case, no known or
      signed id and not `node_id` spelled differently.
    `known_ids` are the ids the caller knows (members, past ones, planned ones); `signed` is what
    the CA has signed before."""
    if not NODE_ID.fullmatch(node_id):
        raise NameRefused(f"bad node id {node_id!r}: use {NODE_ID_RULE}")
    if _ip(node_id) is not None:
        raise NameRefused(
            f"node id {node_id} is an IP address: a client asking for it would accept any certificate "
            "for that address; pick a name"
        )
    folded = node_id.casefold()
    ids = {*known_ids, *signed.ids}
    twin = next((i for i in sorted(ids) if i.casefold() == folded and i != node_id), None)
    if twin is not None:
        raise NameRefused(
            f"node id {node_id} is node {twin}'s spelled in another case; TLS names ignore case, so "
            "its certificate would pass as that node: pick another id"
        )
    if any(h.casefold() == folded for h in signed.hosts):
        raise NameRefused(
            f"node id {node_id} is a host name in a certificate already signed, which would pass "
            "as this node: pick another id"
        )
    taken = {i.casefold() for i in ids} | {folded}
    names: list[str] = []
    for host in hosts:
        ip = _ip(host)
        if ip is None and not (len(host) <= 253 and DNS_NAME.fullmatch(host)):
            raise NameRefused(
                f"host {host!r} is neither an IP address nor a host name (letters, digits, '-', '_' "
                "and dots; no wildcard)"
            )
        name = ip or host
        if host == node_id or name in names:
            continue  # DNS:node_id is in every certificate anyway
        if name.casefold() in taken:
            whose = "this node's own id spelled differently" if name.casefold() == folded else "a node id"
            raise NameRefused(
                f"host {host} is {whose}: a certificate naming it would pass as that node; give the "
                "node's IP address or a host name that is no node's id"
            )
        names.append(name)
    return names


def sign_node_csr(
    ca_dir: Path, csr_pem: bytes, node_id: str, hosts: Sequence[str], known_ids: Iterable[str] = ()
) -> bytes:
    """The CA's certificate (PEM) for `node_id`, over the CSR's public key.

    The name comes from the caller (who checked the join token), never from the CSR's subject,
    and the hosts only as far as `certificate_names` allows, against `known_ids` and every id
    and host name this CA signed before (which it then records)."""
    with _names_locked(ca_dir) as signed:
        names = certificate_names(node_id, hosts, known_ids, signed)
        cert = _sign(ca_dir, csr_pem, node_id, names)
        dns = {n for n in names if _ip(n) is None}
        record = {"ids": sorted(signed.ids | {node_id}), "hosts": sorted(signed.hosts | dns)}
        write_private(ca_dir / CA_NAMES, json.dumps(record, indent=1).encode())
    return cert


def _sign(ca_dir: Path, csr_pem: bytes, node_id: str, hosts: list[str]) -> bytes:
    """The certificate itself: CN=`node_id`, DNS:`node_id` and `hosts` (checked by the caller)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    try:
        csr = x509.load_pem_x509_csr(csr_pem)
    except ValueError as exc:
        raise PkiError(f"not a certificate signing request: {exc}") from None
    if not csr.is_signature_valid:
        raise PkiError("the certificate signing request's signature does not verify")
    public = csr.public_key()
    if not isinstance(public, ec.EllipticCurvePublicKey):
        raise PkiError("node keys must be ECDSA")
    ca_cert = load_cert(ca_dir / CA_CERT)
    ca_key = _load_key(ca_dir / CA_KEY)
    names: list[x509.GeneralName] = [x509.DNSName(node_id)]
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "bhandar node"),
                    x509.NameAttribute(NameOID.COMMON_NAME, node_id),
                ]
            )
        )
        .issuer_name(ca_cert.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365 * NODE_YEARS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        # A node is a server to clients and peers, and a client of its peers.
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def issue_node(
    ca_dir: Path, node_id: str, hosts: Sequence[str], node_tls_dir: Path, known_ids: Iterable[str] = ()
) -> NodeTls:
    """Key and certificate for `node_id` in `node_tls_dir` (with a copy of the CA certificate);
    NameRefused if the names would pass as another node (`certificate_names`)."""
    certificate_names(node_id, hosts, known_ids, signed_names(ca_dir))  # before anything is written
    private_dir(node_tls_dir)
    key_pem, csr_pem = make_csr(node_id)
    cert_pem = sign_node_csr(ca_dir, csr_pem, node_id, hosts, known_ids)
    files = NodeTls.in_dir(node_tls_dir)
    write_private(files.key, key_pem)
    write_private(files.cert, cert_pem)
    write_private(files.ca_cert, (ca_dir / CA_CERT).read_bytes())
    return files


def fingerprint(cert_pem: bytes) -> str:
    """SHA-256 of the certificate's DER form, hex: what a join token pins the CA by."""
    import hashlib

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate(cert_pem)
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def issued_by(cert_pem: bytes, ca_pem: bytes) -> bool:
    """Whether `cert_pem` was signed by the CA `ca_pem` (a joiner's check of the node it asked)."""
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature

    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def server_context(files: NodeTls) -> ssl.SSLContext:
    """What a node's listener speaks: its certificate; a client certificate optional (clients
    authenticate with tokens), verified against the cluster CA when one is shown (peers)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(files.ca_cert))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(files.cert), str(files.key))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def peer_node_id(tls: ssl.SSLObject | Any) -> str | None:
    """The node id in the verified certificate the other side showed, or None if it showed none.

    ssl has already checked the chain to the cluster CA (a certificate that does not chain fails
    the handshake), so the common name is trustworthy here."""
    cert = tls.getpeercert()  # trio.SSLStream forwards getpeercert to its SSLObject
    if not cert:
        return None
    subject: Any = cert.get("subject", ())  # ((("commonName", "A"),), ...)
    for rdn in subject:
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
