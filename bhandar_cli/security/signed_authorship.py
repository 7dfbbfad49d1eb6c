"""Who said it, checked with the cluster CA: the `Authorship` a node of a cluster with TLS runs.

core/membership/authorship.py says who may say what; this module proves it with signatures
(ECDSA P-256, SHA-256, the keys the cluster's TLS already has):

- a member seals its own state with its node key and sends its certificate along; a state is
  taken when the certificate chains to the cluster CA, names the state's member (its common name,
  exactly) and has not expired, and the signature checks. An unsealed state is taken only from
  the member itself (`src`, which the peer gate has checked against the link's certificate): a
  peer of protocol 4 or older sends no seals.
- token records, removals and keyspace definitions are sealed with the CA key, which only
  issuers hold, and checked with the CA certificate every node has.

Checks are cached: a certificate is parsed and checked once, and a signature over the same bytes
verified once (gossip repeats each state to every node several times).
"""

from __future__ import annotations

import datetime
from collections import OrderedDict
from dataclasses import dataclass, replace

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bhandar_cli.core.membership import MemberState, Removal, member_content, removal_content
from bhandar_cli.core.model import KeyspaceDef, Refused, TokenRecord, keyspace_content, token_content

CACHE_MAX = 4096  # checked signatures and certificates remembered (a few per member)
_ECDSA = ec.ECDSA(hashes.SHA256())


@dataclass(frozen=True)
class _Certified:
    """A checked member certificate: whom it names, its key, and until when it is valid."""

    node: str
    key: ec.EllipticCurvePublicKey
    until: datetime.datetime


class SignedAuthorship:
    """The `Authorship` of a node holding `node_key` and `node_cert` (PEM) of the CA `ca_cert`;
    `ca_key` (PEM) only on an issuer."""

    def __init__(
        self, ca_cert: bytes, node_cert: bytes, node_key: bytes, ca_key: bytes | None = None
    ) -> None:
        self._ca = x509.load_pem_x509_certificate(ca_cert)
        ca_public = self._ca.public_key()
        if not isinstance(ca_public, ec.EllipticCurvePublicKey):
            raise ValueError("the cluster CA's key is not ECDSA")
        self._ca_public = ca_public
        self._key = _private(node_key)
        self._cert_der = x509.load_pem_x509_certificate(node_cert).public_bytes(serialization.Encoding.DER)
        self._ca_key = _private(ca_key) if ca_key is not None else None
        self._certs: OrderedDict[bytes, _Certified | str] = OrderedDict()
        self._verified: OrderedDict[tuple[bytes, bytes], bool] = OrderedDict()

    @property
    def issuer(self) -> bool:
        return self._ca_key is not None

    # --- members -----------------------------------------------------------------------------

    def seal_member(self, state: MemberState) -> MemberState:
        content = member_content(state)
        return replace(state, cert=self._cert_der, seal=self._key.sign(content, _ECDSA))

    def admits_member(self, state: MemberState, src: str) -> str | None:
        if not state.seal:
            if src == state.id:
                return None  # first-hand, over a link whose certificate names `src`
            return f"an unsealed state relayed by {src} (only {state.id} may say it unsealed)"
        certified = self._certificate(state.cert)
        if isinstance(certified, str):
            return certified
        if certified.node != state.id:
            return f"sealed with the certificate of {certified.node}"
        if certified.until < datetime.datetime.now(datetime.UTC):
            return f"the certificate of {state.id} has expired"
        if not self._verify(certified.key, state.seal, member_content(state)):
            return "its seal does not match it (forged or changed)"
        return None

    def _certificate(self, der: bytes) -> _Certified | str:
        known = self._certs.get(der)
        if known is None:
            known = self._certs[der] = _check_certificate(der, self._ca)
            if len(self._certs) > CACHE_MAX:
                self._certs.popitem(last=False)
        return known

    # --- what issuers say --------------------------------------------------------------------

    def seal_token(self, record: TokenRecord) -> TokenRecord:
        return replace(record, seal=self._issuer_seal(token_content(record), "change a token").hex())

    def admits_token(self, record: TokenRecord) -> str | None:
        try:
            seal = bytes.fromhex(record.seal)
        except ValueError:
            seal = b""
        if not seal:
            return "not sealed by an issuer"
        if not self._verify(self._ca_public, seal, token_content(record)):
            return "its seal is not an issuer's (forged or changed)"
        return None

    def seal_removal(self, removal: Removal) -> Removal:
        return replace(removal, seal=self._issuer_seal(removal_content(removal), "remove a node"))

    def admits_removal(self, removal: Removal) -> str | None:
        if not isinstance(removal.seal, bytes) or not removal.seal:
            return "not sealed by an issuer"
        if not self._verify(self._ca_public, removal.seal, removal_content(removal)):
            return "its seal is not an issuer's (forged or changed)"
        return None

    def seal_keyspace(self, ks: KeyspaceDef) -> bytes:
        return b"" if self._ca_key is None else self._ca_key.sign(keyspace_content(ks), _ECDSA)

    def admits_keyspace(self, ks: KeyspaceDef, seal: bytes) -> str | None:
        if not isinstance(seal, bytes) or not seal:
            return "not sealed by an issuer"
        if not self._verify(self._ca_public, seal, keyspace_content(ks)):
            return "its seal is not an issuer's (forged or changed)"
        return None

    def _issuer_seal(self, content: bytes, what: str) -> bytes:
        if self._ca_key is None:
            raise Refused(
                f"this node holds no CA key, so it cannot {what}: only an issuing node can "
                "(one started with --ca-key; `cluster up --issuers` names them)"
            )
        return self._ca_key.sign(content, _ECDSA)

    def _verify(self, key: ec.EllipticCurvePublicKey, seal: bytes, content: bytes) -> bool:
        cached = self._verified.get((seal, content))
        if cached is None:
            try:
                key.verify(seal, content, _ECDSA)
                cached = True
            except (InvalidSignature, ValueError):
                cached = False
            self._verified[(seal, content)] = cached
            if len(self._verified) > CACHE_MAX:
                self._verified.popitem(last=False)
        return cached


def issuer_sealed(record: TokenRecord, ca_key: bytes) -> TokenRecord:
    """`record` sealed with the CA key (PEM): what `cluster up` does to the admin token it makes,
    so that a node that joins later takes it from gossip."""
    return replace(record, seal=_private(ca_key).sign(token_content(record), _ECDSA).hex())


def _private(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("not an ECDSA private key")
    return key


def _check_certificate(der: bytes, ca: x509.Certificate) -> _Certified | str:
    """A member certificate this CA issued, or why it is not one."""
    if not isinstance(der, bytes) or not der:
        return "sealed without a certificate"
    try:
        cert = x509.load_der_x509_certificate(der)
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "sealed with a certificate the cluster CA did not issue"
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    key = cert.public_key()
    if len(names) != 1 or not isinstance(key, ec.EllipticCurvePublicKey):
        return "sealed with a certificate that names no node"
    return _Certified(str(names[0].value), key, cert.not_valid_after_utc)
