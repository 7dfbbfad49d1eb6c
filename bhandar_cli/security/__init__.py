"""Who may do what: the cluster CA and certificates, tokens and auth, join tokens, the data
key, rate limits, the peer gate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.security.access import PLAIN, TOKEN_ENV, ClientAccess
    from bhandar_cli.security.auth import (
        Authenticator,
        AuthFileError,
        Credential,
        load_auth_file,
        mint,
        request_op,
        write_auth_file,
    )
    from bhandar_cli.security.ca_trust import CA_CERT, NODE_CERT, NODE_KEY, TLS_DIR, NodeTls, client_context
    from bhandar_cli.security.data_key import (
        DataKeyProblem,
        cipher_for,
        ensure_key,
        key_path,
        node_key,
        read_key_file,
    )
    from bhandar_cli.security.join_tokens import (
        DEFAULT_TTL,
        JOIN_TOKEN_ENV,
        JoinRefused,
        JoinToken,
        JoinTokens,
        parse_ttl,
    )
    from bhandar_cli.security.peer_gate import PeerGate, PeerRefused
    from bhandar_cli.security.pki import (
        CA_KEY,
        NameRefused,
        PkiError,
        create_ca,
        fingerprint,
        issue_node,
        issued_by,
        make_csr,
        peer_node_id,
        private_dir,
        server_context,
        sign_node_csr,
        write_private,
    )
    from bhandar_cli.security.refusal_log import RefusalLog
    from bhandar_cli.security.signed_authorship import SignedAuthorship, issuer_sealed

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "CA_CERT",
    "CA_KEY",
    "DEFAULT_TTL",
    "JOIN_TOKEN_ENV",
    "NODE_CERT",
    "NODE_KEY",
    "PLAIN",
    "TLS_DIR",
    "TOKEN_ENV",
    "AuthFileError",
    "Authenticator",
    "ClientAccess",
    "Credential",
    "DataKeyProblem",
    "JoinRefused",
    "JoinToken",
    "JoinTokens",
    "NameRefused",
    "NodeTls",
    "PeerGate",
    "PeerRefused",
    "PkiError",
    "RefusalLog",
    "SignedAuthorship",
    "cipher_for",
    "client_context",
    "create_ca",
    "ensure_key",
    "fingerprint",
    "issue_node",
    "issued_by",
    "issuer_sealed",
    "key_path",
    "load_auth_file",
    "make_csr",
    "mint",
    "node_key",
    "parse_ttl",
    "peer_node_id",
    "private_dir",
    "read_key_file",
    "request_op",
    "server_context",
    "sign_node_csr",
    "write_auth_file",
    "write_private",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "AuthFileError": "auth",
            "Authenticator": "auth",
            "CA_CERT": "ca_trust",
            "CA_KEY": "pki",
            "ClientAccess": "access",
            "Credential": "auth",
            "DEFAULT_TTL": "join_tokens",
            "DataKeyProblem": "data_key",
            "JOIN_TOKEN_ENV": "join_tokens",
            "JoinRefused": "join_tokens",
            "JoinToken": "join_tokens",
            "JoinTokens": "join_tokens",
            "NODE_CERT": "ca_trust",
            "NODE_KEY": "ca_trust",
            "NameRefused": "pki",
            "NodeTls": "ca_trust",
            "PLAIN": "access",
            "PeerGate": "peer_gate",
            "PeerRefused": "peer_gate",
            "PkiError": "pki",
            "RefusalLog": "refusal_log",
            "SignedAuthorship": "signed_authorship",
            "TLS_DIR": "ca_trust",
            "TOKEN_ENV": "access",
            "cipher_for": "data_key",
            "client_context": "ca_trust",
            "create_ca": "pki",
            "ensure_key": "data_key",
            "fingerprint": "pki",
            "issue_node": "pki",
            "issued_by": "pki",
            "issuer_sealed": "signed_authorship",
            "key_path": "data_key",
            "load_auth_file": "auth",
            "make_csr": "pki",
            "mint": "auth",
            "node_key": "data_key",
            "parse_ttl": "join_tokens",
            "peer_node_id": "pki",
            "private_dir": "pki",
            "read_key_file": "data_key",
            "request_op": "auth",
            "server_context": "pki",
            "sign_node_csr": "pki",
            "write_auth_file": "auth",
            "write_private": "pki",
        },
    )
