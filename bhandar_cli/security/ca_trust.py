"""What a client of a process cluster needs to check a node: where the cluster's CA certificate
lives, and the ssl context that checks a node's certificate with it (ssl alone).

The rest of the cluster's PKI (making the CA, node identities, signing) is security/pki.py's, which
re-exports these; a one-shot command imports this module only, not pki.py and what it needs.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bhandar_cli.security.pki import NodeTls

TLS_DIR = "tls"
CA_CERT = "ca.crt"


def client_context(ca_cert: Path, identity: NodeTls | None = None) -> ssl.SSLContext:
    """What connects to a node: checks the node's certificate against the cluster CA and its name
    (pass the node id as `server_hostname`); a node connecting to a peer shows its own."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca_cert))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if identity is not None:
        ctx.load_cert_chain(str(identity.cert), str(identity.key))
    return ctx
