"""How a node process runs: `NodeOptions`, what `bhandar node run` was given (node/process.py runs
a node by them; node/exposure.py checks where they let it listen)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bhandar_cli.node.net import FRAME_TIMEOUT, PROTOCOL_VERSION


@dataclass(frozen=True, kw_only=True)
class NodeOptions:
    """How a node process runs (`bhandar node run`'s options), given by name."""

    id: str
    data_dir: str
    host: str = "127.0.0.1"
    port: int = 0
    http_port: int = 0  # 0: any free port; -1: no HTTP API
    http_workers: int = 0  # HTTP front processes holding the connections (node/http/fronts.py); 0: none
    zone: str = "z1"
    seeds: tuple[tuple[str, int], ...] = ()
    vnodes: int = 8
    replicas: int = 3
    fsync: str = "batch"
    frame_timeout: float = FRAME_TIMEOUT
    tls_dir: str | None = None  # ca.crt, node.crt, node.key; None: plain TCP, loopback only
    ca_key: str = ""  # the cluster CA's key (DIR/tls/ca.key): this node may admit joiners
    auth_file: str = ""  # token records to start with (more come by gossip)
    admit_anyone: bool = False  # no token checks: loopback only (`cluster up --insecure`)
    snapshot_dir: str = ""  # where `snapshot NAME` links tables ("": DATA_DIR/../snapshots)
    bootstrap: bool = False  # first start of a node added to a running cluster: join, stream
    protocol: int = PROTOCOL_VERSION  # the newest wire protocol this node speaks (node/net/codec.py)
    data_key: bytes | None = field(default=None, repr=False)  # encryption at rest (security/data_key.py)
    config: str = ""  # the cluster configuration to start with, as JSON (core/model/live_config.py)
