"""The cluster's certificate authority and each node's TLS identity (the `cryptography` package).

A process cluster has its own CA, made by `cluster up` (or `cluster init`). Every node holds a key
and a certificate signed by that CA whose subject common name and DNS name are its node id (`A`,
`B`, ...), so one `ssl` check proves both "a member of this cluster" and "which one": a client
connecting to node B asks for server name `B`, and a node reading a peer's certificate learns the
peer's id from it. Clients (the CLI, HTTP) hold no certificate: they check the node's with the
CA certificate and show a token (node/auth).

Files (all private material 0600, written atomically):

    DIR/tls/ca.crt  ca.key             the CA (ca.key never leaves the operator's machine, except
                                       to nodes that sign joiners' certificates)
    DATA_DIR/tls/ca.crt node.crt node.key   a node's identity

Keys are ECDSA P-256: a TLS handshake with them costs a fraction of RSA's, and connections are
long-lived anyway.

`cryptography` is imported by the functions that make or read certificates only, and so are
datetime, hashlib and ipaddress: a client that just checks a node's certificate (`client_context`,
ssl alone, in security/ca_trust.py with the TLS files' names and `NodeTls`, re-exported here) starts
some 25 ms sooner.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
CA_YEARS = 10
NODE_YEARS = 5


class PkiError(Exception):
    """TLS material is missing or does not fit (the operator's setup, not a bug)."""


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


def sign_node_csr(ca_dir: Path, csr_pem: bytes, node_id: str, hosts: list[str]) -> bytes:
    """The CA's certificate (PEM) for `node_id`, over the CSR's public key.

    The name comes from the caller (who checked the join token), never from the CSR's subject."""
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


def issue_node(ca_dir: Path, node_id: str, hosts: list[str], node_tls_dir: Path) -> NodeTls:
    """Key and certificate for `node_id` in `node_tls_dir` (with a copy of the CA certificate)."""
    private_dir(node_tls_dir)
    key_pem, csr_pem = make_csr(node_id)
    cert_pem = sign_node_csr(ca_dir, csr_pem, node_id, hosts)
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
