"""The cluster file: what `cluster up` started, so every later command can find and reach it.

`DIR/cluster.json` lists each node's id, zone, host, peer and HTTP ports, pid, data directory,
log and wire protocol version (`node run --protocol`, kept so a restart keeps it; `cluster
upgrade --to` changes it), the cluster configuration a `config set` rolled out (so a restarted
node comes back with it: `node run --config`), plus the faults the operator injected (partition
groups, per-node delays) so a restarted node gets them back. It is written atomically (temporary file, then
rename): a command interrupted half-way never leaves a torn file behind for the next one.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bhandar_cli.node.net import PROTOCOL_VERSION
from bhandar_cli.security import CA_CERT, TLS_DIR, TOKEN_ENV, ClientAccess

FILE_NAME = "cluster.json"
FORMAT = 1
DEFAULT_DIR = ".bhandar"
ENV_VAR = "BHANDAR_CLUSTER"


class ClusterFileError(Exception):
    """The cluster directory has no usable cluster file (the operator's setup, not a bug)."""


@dataclass(frozen=True)
class NodeEntry:
    id: str
    zone: str
    host: str
    port: int
    http_port: int
    data_dir: str
    log: str
    pid: int = 0  # 0: not running (stopped by `cluster down`, or never started)
    protocol: int = PROTOCOL_VERSION  # the newest wire protocol the node speaks (node/net/codec.py)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class ClusterFile:
    dir: str
    nodes: tuple[NodeEntry, ...]
    vnodes: int = 8
    replicas: int = 3
    seeds: tuple[str, ...] = ()  # node ids whose addresses every node is given as seeds
    partitions: tuple[tuple[str, ...], ...] = ()
    delays: dict[str, float] = field(default_factory=dict)  # node -> extra milliseconds
    extra_args: tuple[str, ...] = ()  # more `node run` options (tests shorten timeouts)
    tls: bool = False  # nodes speak TLS with certificates of the CA in DIR/tls (security/pki.py)
    token: str = ""  # the token this directory's CLI shows (the admin token `cluster up` made)
    encrypt: bool = (
        False  # nodes encrypt their WAL and SSTables with DIR/keys/data.key (security/data_key.py)
    )
    config: dict[str, Any] = field(default_factory=dict)  # cluster configuration: {version, values}
    # The nodes given the CA key (`node run --ca-key`): only they sign certificates for machines
    # joining with a token, so any other node, compromised, can mint none. () : the first node.
    issuers: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        return [n.id for n in self.nodes]

    @property
    def issuing(self) -> tuple[str, ...]:
        """The nodes that hold the CA key: those named at `cluster up --issuers`, else the first."""
        return self.issuers or (self.nodes[0].id,)

    @property
    def zones(self) -> dict[str, str]:
        return {n.id: n.zone for n in self.nodes}

    def node(self, name: str) -> NodeEntry:
        wanted = name.strip().upper() if len(name.strip()) == 1 else name.strip()
        for entry in self.nodes:
            if entry.id == wanted:
                return entry
        raise ClusterFileError(f"unknown node {name!r} (nodes are {', '.join(self.names)})")

    def with_node(self, entry: NodeEntry) -> ClusterFile:
        return replace(self, nodes=tuple(entry if n.id == entry.id else n for n in self.nodes))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "vnodes": self.vnodes,
            "replicas": self.replicas,
            "seeds": list(self.seeds),
            "partitions": [list(g) for g in self.partitions],
            "delays": dict(self.delays),
            "extra_args": list(self.extra_args),
            "tls": self.tls,
            "token": self.token,
            "encrypt": self.encrypt,
            "config": dict(self.config),
            "issuers": list(self.issuers),
            "nodes": [asdict(n) for n in self.nodes],
        }


def resolve_dir(option: str | None) -> Path:
    """--cluster/--dir, else $BHANDAR_CLUSTER, else ./.bhandar."""
    return Path(option or os.environ.get(ENV_VAR) or DEFAULT_DIR)


def path_of(directory: str | Path) -> Path:
    return Path(directory) / FILE_NAME


def load(directory: str | Path) -> ClusterFile:
    path = path_of(directory)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ClusterFileError(
            f"no cluster in {directory} ({path} not found): start one with `bhandar cluster up "
            f"--dir {directory}` or point --cluster / ${ENV_VAR} at a running one"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ClusterFileError(
            f"cluster file {path} is unreadable ({exc}); stop any of its nodes still running, remove it "
            "and run cluster up"
        ) from exc
    try:
        if raw.get("format") != FORMAT:
            raise ValueError(f"format {raw.get('format')!r}, this bhandar reads format {FORMAT}")
        nodes = tuple(NodeEntry(**n) for n in raw["nodes"])
        if not nodes:
            raise ValueError("it lists no nodes")
        return ClusterFile(
            str(directory),
            nodes,
            int(raw["vnodes"]),
            int(raw["replicas"]),
            tuple(raw.get("seeds", ())),
            tuple(tuple(g) for g in raw.get("partitions", ())),
            {str(k): float(v) for k, v in raw.get("delays", {}).items()},
            tuple(raw.get("extra_args", ())),
            bool(raw.get("tls", False)),
            str(raw.get("token", "")),
            bool(raw.get("encrypt", False)),  # a cluster file from before: plain, as it was
            dict(raw.get("config") or {}),
            tuple(str(i) for i in raw.get("issuers", ())),  # from before: the first node
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ClusterFileError(
            f"cluster file {path} is malformed ({exc}); stop any of its nodes still running, remove it "
            "and run cluster up"
        ) from exc


def save(cluster: ClusterFile) -> None:
    from bhandar_cli.security import write_private

    path = path_of(cluster.dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    # 0600: the file may hold the cluster's admin token.
    write_private(path, (json.dumps(cluster.to_json(), indent=2) + "\n").encode())


def client_access(cluster: ClusterFile) -> ClientAccess:
    """How a client reaches the cluster's nodes: its CA when the cluster runs TLS; the token from
    $BHANDAR_TOKEN, else the one the cluster file keeps (the admin token `cluster up` made)."""
    ca = Path(cluster.dir) / TLS_DIR / CA_CERT if cluster.tls else None
    token = os.environ.get(TOKEN_ENV) or cluster.token or None
    return ClientAccess(ca, token)
