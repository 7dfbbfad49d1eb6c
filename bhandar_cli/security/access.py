"""How a client reaches the nodes of one process cluster: the CA it trusts and the token it shows.

A secure cluster (the default of `cluster up`) serves its port over TLS with certificates from the
cluster CA (security/pki.py) and admits clients by token (security/auth.py); an `--insecure` one, on
loopback only, serves plain TCP and admits anyone. The CLI, the REPL's `--connect`, the
supervisor and the tests all build their connections from one `ClientAccess`; a cluster file says
which (fleet/cluster_file.py's `client_access`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TOKEN_ENV = "BHANDAR_TOKEN"  # the token a client shows, when given (fleet/cluster_file.py reads it)


@dataclass(frozen=True)
class ClientAccess:
    """The CA certificate to check nodes against (None: plain TCP) and the token to show (None:
    none; an insecure cluster asks for none)."""

    ca_cert: Path | None = None
    token: str | None = None


PLAIN = ClientAccess()
