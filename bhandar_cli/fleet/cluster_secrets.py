"""What makes a process cluster on this machine secure: its CA and node certificates, the admin
token its nodes start with, and its data key. `cluster up` makes them; `cluster add` issues one
certificate.

The CA lives in DIR/tls (security/pki.py), each node's identity in DATA_DIR/tls; the admin token's
hash goes into DIR/auth.json, which every node is started with (`--auth-file`), and the token
itself into the cluster file (0600), where the CLI finds it (cluster_file.py `client_access`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from bhandar_cli.core.model import ALL_KEYSPACES
from bhandar_cli.fleet.cluster_file import ClusterFile, NodeEntry
from bhandar_cli.security import (
    CA_KEY,
    TLS_DIR,
    NodeTls,
    create_ca,
    issue_node,
    key_path,
    mint,
    private_dir,
    read_key_file,
    write_auth_file,
)

AUTH_FILE = "auth.json"


def node_tls_dir(entry: NodeEntry) -> Path:
    """Where a node of a secure cluster keeps its certificate and key."""
    return Path(entry.data_dir) / TLS_DIR


def issue_certificates(cluster: ClusterFile) -> None:
    """The cluster CA in DIR/tls (made if missing) and a certificate for every node lacking one."""
    ca_dir = Path(cluster.dir) / TLS_DIR
    if not (ca_dir / CA_KEY).exists():
        create_ca(ca_dir, Path(cluster.dir).name)
    for entry in cluster.nodes:
        if not NodeTls.in_dir(node_tls_dir(entry)).exists():
            private_dir(Path(entry.data_dir))
            issue_node(ca_dir, entry.id, [entry.host], node_tls_dir(entry), cluster.names)


def make_admin_token(cluster: ClusterFile) -> ClusterFile:
    """A new admin token on every keyspace: its hash into DIR/auth.json, the token into the
    cluster file returned (the caller saves it)."""
    token, record = mint({ALL_KEYSPACES: "admin"}, 0.0, 0, time.time())
    ca_key = Path(cluster.dir) / TLS_DIR / CA_KEY
    if ca_key.exists():  # sealed by the CA: a node that joins later believes gossip about it
        from bhandar_cli.security import issuer_sealed  # cryptography: only here

        record = issuer_sealed(record, ca_key.read_bytes())
    write_auth_file(Path(cluster.dir) / AUTH_FILE, [record])
    return replace(cluster, token=token)


def cluster_key(cluster: ClusterFile) -> bytes | None:
    """The data key of a process cluster started with encryption (None: a plain cluster)."""
    return read_key_file(key_path(cluster.dir)) if cluster.encrypt else None
