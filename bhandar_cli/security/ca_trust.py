"""What a client of a process cluster needs to check a node: where the cluster's CA certificate
and a node's TLS identity live (`NodeTls`), and the ssl context that checks a node's certificate
with the CA's (ssl alone).

The rest of the cluster's PKI (making the CA, node identities, signing) is security/pki.py's, which
re-exports these; a one-shot command imports this module only, not pki.py and what it needs.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

TLS_DIR = "tls"
CA_CERT = "ca.crt"
NODE_CERT = "node.crt"
NODE_KEY = "node.key"


@dataclass(frozen=True)
class NodeTls:
    """Where one node's TLS identity lives: the CA certificate, its own certificate and key."""

    ca_cert: Path
    cert: Path
    key: Path

    @classmethod
    def in_dir(cls, directory: str | Path) -> NodeTls:
        d = Path(directory)
        return cls(d / CA_CERT, d / NODE_CERT, d / NODE_KEY)

    def exists(self) -> bool:
        return self.ca_cert.is_file() and self.cert.is_file() and self.key.is_file()


def client_context(ca_cert: Path, identity: NodeTls | None = None) -> ssl.SSLContext:
    """What connects to a node: checks the node's certificate against the cluster CA and its name
    (pass the node id as `server_hostname`); a node connecting to a peer shows its own."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca_cert))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if identity is not None:
        ctx.load_cert_chain(str(identity.cert), str(identity.key))
    return ctx
