"""A process cluster changing size on disk: a new node planned, certified and started; a node that
left the ring stopped and struck from the cluster file.

`add_node` plans the new node's entry (the next free name unless one is given, free ports on the
cluster's host, a data directory beside the others), issues its certificate when the cluster has
a CA (`DIR/tls/ca.key`), starts it as a joining node seeded with the nodes running now (a seed
may be down: the cluster file's seeds are not enough), waits until it answers and knows every
member, and saves the cluster file. The node then bootstraps through gossip as any node joins:
it streams its ranges and announces itself normal (the caller waits for that, client_ops.add).

A name is never reused: a node that left keeps its data directory, and its name stays in the
other nodes' gossip as "left", so a new node with that name would be taken for the old one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bhandar_cli.core.model import BadInput
from bhandar_cli.fleet import cluster_file, pids, supervisor
from bhandar_cli.fleet.cluster_file import ClusterFile, NodeEntry
from bhandar_cli.fleet.cluster_secrets import node_tls_dir
from bhandar_cli.fleet.placement import free_ports
from bhandar_cli.host import next_node_name
from bhandar_cli.security import CA_KEY, TLS_DIR, issue_node, private_dir

# `node run` option for a node's first start: boot as "joining" and stream its ranges before it
# serves them. Later starts keep the status the node saved, so the option is not in the file.
BOOTSTRAP_FLAG = "--bootstrap"


def data_root(cluster: ClusterFile) -> Path:
    """Where the nodes' data directories are (side by side, as `cluster up` made them)."""
    return Path(cluster.dir) / supervisor.DATA_DIR


def names_taken(cluster: ClusterFile) -> set[str]:
    """Names of the members and of every node that ever had a data directory here."""
    root = data_root(cluster)
    # A node that left has its directory set aside as NODE.left (or NODE.left2, ...): its name
    # stays taken, so a new node never meets its old certificate or data.
    former = {p.name.split(".")[0] for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()
    return set(cluster.names) | (former - {""})


def next_free_name(cluster: ClusterFile) -> str:
    return next_node_name(names_taken(cluster))


def plan_node(cluster: ClusterFile, name: str, zone: str | None) -> NodeEntry:
    """The entry of a new node `name` (BadInput if the name is taken; client_ops.add has checked
    the spelling of the name and zone)."""
    if name in cluster.names:
        raise BadInput(f"node {name} already exists")
    if name in names_taken(cluster):
        raise BadInput(
            f"node name {name} was used by a node that left (its data is in {data_root(cluster) / name}); "
            f"choose another, e.g. {next_free_name(cluster)}"
        )
    zones = sorted(set(cluster.zones.values()))
    chosen = zone or zones[len(cluster.nodes) % len(zones)]
    host = cluster.nodes[0].host
    port, http_port = free_ports(2, host)
    data_dir, log = data_root(cluster) / name, Path(cluster.dir) / f"{name}.log"
    return NodeEntry(name, chosen, host, port, http_port, str(data_dir), str(log))


async def add_node(
    cluster: ClusterFile, name: str, zone: str | None, timeout: float = supervisor.START_TIMEOUT
) -> ClusterFile:
    """Start node `name` as a joining member of `cluster`; the saved cluster file with it in."""
    entry = plan_node(cluster, name, zone)
    ca_dir = Path(cluster.dir) / TLS_DIR
    if (ca_dir / CA_KEY).is_file():
        private_dir(Path(entry.data_dir))
        issue_node(ca_dir, entry.id, [entry.host], node_tls_dir(entry), names_taken(cluster))
    running = tuple(n.id for n in cluster.nodes if pids.pid_alive(n.pid))
    if not running:
        raise BadInput("every node is down: start one before adding another")
    grown = replace(cluster, nodes=(*cluster.nodes, entry))
    first_start = replace(grown, seeds=running, extra_args=(*cluster.extra_args, BOOTSTRAP_FLAG))
    grown = grown.with_node(supervisor.spawn(first_start, entry))
    cluster_file.save(grown)  # now, so `cluster down` finds the process if the wait fails
    try:
        await supervisor.wait_ready(grown, [name], timeout)
    except BaseException:
        supervisor.kill_process(grown.node(name).pid)
        cluster_file.save(cluster)
        raise
    return grown


async def retire_node(cluster: ClusterFile, name: str) -> ClusterFile:
    """Stop a node that has left the ring and strike it from the cluster file (its data directory
    is set aside as NODE.left, so a later `cluster up` does not count it as a member). A seed that
    left is replaced by the remaining members, so restarts find the cluster."""
    from bhandar_cli.fleet.cluster_data import retire_node_dir

    leaving = cluster.node(name)
    await supervisor.stop(leaving)
    retire_node_dir(str(Path(leaving.data_dir).parent), Path(leaving.data_dir).name)
    rest = tuple(n for n in cluster.nodes if n.id != name)
    seeds = tuple(s for s in cluster.seeds if s != name) or tuple(n.id for n in rest[:3])
    shrunk = replace(
        cluster,
        nodes=rest,
        seeds=seeds,
        partitions=tuple(g for g in (tuple(x for x in g if x != name) for g in cluster.partitions) if g),
        delays={n: ms for n, ms in cluster.delays.items() if n != name},
    )
    cluster_file.save(shrunk)
    return shrunk
