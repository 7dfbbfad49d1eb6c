"""How a client reaches the nodes of one process cluster: the CA it trusts and the token it shows.

A secure cluster (the default of `cluster up`) serves its port over TLS with certificates from the
cluster CA (security/pki.py) and admits clients by token (security/auth.py); an `--insecure` one, on
loopback only, serves plain TCP and admits anyone. The CLI, the REPL's `--connect`, the
supervisor and the tests all build their connections from one `ClientAccess`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bhandar_cli.fleet.cluster_file import ClusterFile
from bhandar_cli.security.ca_trust import CA_CERT, TLS_DIR

TOKEN_ENV = "BHANDAR_TOKEN"


@dataclass(frozen=True)
class ClientAccess:
    """The CA certificate to check nodes against (None: plain TCP) and the token to show (None:
    none; an insecure cluster asks for none)."""

    ca_cert: Path | None = None
    token: str | None = None


PLAIN = ClientAccess()


def for_cluster(cluster: ClusterFile) -> ClientAccess:
    """What the cluster file says: its CA when the cluster runs TLS; the token from
    $BHANDAR_TOKEN, else the one the cluster file keeps (the admin token `cluster up` made)."""
    ca = Path(cluster.dir) / TLS_DIR / CA_CERT if cluster.tls else None
    token = os.environ.get(TOKEN_ENV) or cluster.token or None
    return ClientAccess(ca, token)
