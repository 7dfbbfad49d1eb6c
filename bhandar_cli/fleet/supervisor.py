"""Node processes on this machine: start them detached, wait until they answer, stop or kill them.

Nodes run as `python -m bhandar_cli.cli.node_cmd run ...` in a session of their own (so a terminal's
Ctrl-C or the end of `cluster up` does not reach them), with stdout and stderr in a log file per
node in the cluster directory. Every wait here is bounded by a deadline and polls a condition; a
node that dies while we wait is reported with the end of its log. Faults that the operator injects
through the nodes' admin RPC (partition, heal, delay) are also kept in the cluster file, so a
restarted node is given them again.

A cluster is secure unless asked otherwise: `up` makes the cluster CA in DIR/tls and a certificate
per node in DATA_DIR/tls (security/pki.py), starts every node with `--tls-dir`, and reaches the
nodes over TLS (`client_access` of the cluster file). It also makes the cluster's admin token: its
hash goes into the auth file every node is started with (DIR/auth.json), the token itself into the
cluster file; every call here shows the token `client_access` picks. Everything it creates is its
owner's only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import trio

from bhandar_cli.core.model import ClientError
from bhandar_cli.fleet import cluster_file
from bhandar_cli.fleet.cluster_file import ClusterFile, ClusterFileError, NodeEntry, client_access
from bhandar_cli.fleet.cluster_secrets import AUTH_FILE, issue_certificates, make_admin_token, node_tls_dir
from bhandar_cli.fleet.node_logs import START_MARK, last_words, log_tail
from bhandar_cli.fleet.pids import CHILDREN, pid_alive
from bhandar_cli.fleet.placement import DEFAULT_HOST, node_ports
from bhandar_cli.host import node_names, partition_groups, zone_map
from bhandar_cli.node.net import RpcError, rpc_once
from bhandar_cli.security import CA_KEY, PLAIN, TLS_DIR, ClientAccess, ensure_key, key_path, private_dir

DATA_DIR = "data"  # the nodes' data directories, under the cluster directory
START_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0
SHUTDOWN_RPC_TIMEOUT = 3.0
POLL = 0.05
TERM_GRACE = 4.0  # after SIGTERM, before SIGKILL: a node drains its requests in flight (up to 3 s) first
KILL_GRACE = 2.0  # after SIGKILL, before a node is reported as not exiting
STILL_RUNNING = "still running"


class StartError(Exception):
    """Nodes did not come up (their logs say why)."""


def node_command(cluster: ClusterFile, entry: NodeEntry) -> list[str]:
    ca_key = Path(cluster.dir) / TLS_DIR / CA_KEY
    seeds = [cluster.node(s) for s in cluster.seeds if s != entry.id] or [
        n for n in cluster.nodes if n.id != entry.id
    ][:1]
    return [
        sys.executable,
        "-P",  # never import from the current directory (a stray attr.py there broke every node)
        "-m",
        "bhandar_cli.cli.node_cmd",
        "run",
        *("--id", entry.id, "--host", entry.host, "--port", str(entry.port)),
        *("--http-port", str(entry.http_port), "--data-dir", entry.data_dir, "--zone", entry.zone),
        *("--seeds", ",".join(s.address for s in seeds)),
        *("--vnodes", str(cluster.vnodes), "--replicas", str(cluster.replicas)),
        *(("--tls-dir", str(node_tls_dir(entry))) if cluster.tls else ()),
        # Only the issuing nodes may admit a new machine with a join token (node/join.py).
        *(("--ca-key", str(ca_key)) if cluster.tls and entry.id in cluster.issuing else ()),
        *("--snapshot-dir", str(Path(cluster.dir) / "snapshots")),
        *("--protocol", str(entry.protocol)),
        # A cluster without tokens (`--insecure`) says so: a node checks tokens unless told not to.
        *(("--auth-file", str(Path(cluster.dir) / AUTH_FILE)) if cluster.token else ("--admit-anyone",)),
        *(("--data-key-file", str(key_path(cluster.dir))) if cluster.encrypt else ()),
        *(("--config", json.dumps(cluster.config)) if cluster.config else ()),
        *cluster.extra_args,
    ]


def spawn(cluster: ClusterFile, entry: NodeEntry) -> NodeEntry:
    """Start one node detached; returns its entry with the new pid."""
    private_dir(Path(entry.data_dir))
    fd = os.open(entry.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)  # a log from before may be world-readable
    with open(fd, "ab") as log:
        log.write(f"{START_MARK}{entry.id}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            node_command(cluster, entry),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    CHILDREN[proc.pid] = proc
    return replace(entry, pid=proc.pid)


def plan(
    directory: Path,
    nodes: int,
    zones: int,
    base_port: int,
    vnodes: int,
    replicas: int,
    hosts: tuple[str, ...] = (),
) -> ClusterFile:
    names = node_names(nodes)
    zone_of = zone_map(names, zones)
    host_of = list(hosts) or [DEFAULT_HOST] * nodes  # node i listens on host_of[i]
    ports = node_ports(host_of, base_port)
    entries = tuple(
        NodeEntry(
            name,
            zone_of[name],
            host_of[i],
            ports[2 * i],
            ports[2 * i + 1],
            str(directory / DATA_DIR / name),
            str(directory / f"{name}.log"),
        )
        for i, name in enumerate(names)
    )
    return ClusterFile(str(directory), entries, vnodes, replicas, tuple(names[:3]))


def running_cluster(directory: str | Path) -> ClusterFile | None:
    """The cluster file of `directory` if any of its node processes is alive."""
    try:
        old = cluster_file.load(Path(directory).resolve())
    except ClusterFileError:
        return None
    return old if any(pid_alive(n.pid) for n in old.nodes) else None


async def up(
    directory: str | Path,
    nodes: int = 5,
    zones: int = 3,
    base_port: int = 0,
    vnodes: int = 8,
    replicas: int = 3,
    extra_args: Iterable[str] = (),
    timeout: float = START_TIMEOUT,
    hosts: tuple[str, ...] = (),
    tls: bool = True,
    tokens: bool | None = None,
    protocol: int | None = None,
    encrypt: bool = True,
    issuers: tuple[str, ...] = (),
) -> ClusterFile:
    """Start a cluster in `directory` and wait until every node knows every other; over TLS
    with a new CA and node certificates, unless `tls` is False (plain TCP on loopback). With
    `tokens` (default: as `tls`) its nodes admit clients by token, starting with a new admin
    token kept in the cluster file. `protocol` runs every node at that wire protocol version.
    `issuers` are the nodes given the CA key to admit machines joining with a token (default: the
    first node only).
    With `encrypt` (recorded in the cluster file, so restarts keep it) the nodes encrypt their
    data at rest with DIR/keys/data.key, made here if missing (security/data_key.py)."""
    directory = Path(directory).resolve()
    old = running_cluster(directory)
    if old is not None:
        raise ClusterFileError(
            f"a cluster is already running in {directory}: "
            f"stop it first (bhandar cluster down --dir {directory})"
        )
    private_dir(directory / DATA_DIR)
    private_dir(directory)
    cluster = replace(
        plan(directory, nodes, zones, base_port, vnodes, replicas, hosts),
        extra_args=tuple(extra_args),
        tls=tls,
        encrypt=encrypt,
        issuers=issuers,
    )
    if encrypt:
        ensure_key(directory)
    if protocol is not None:
        cluster = replace(cluster, nodes=tuple(replace(n, protocol=protocol) for n in cluster.nodes))
    if tls:
        issue_certificates(cluster)
    if tls if tokens is None else tokens:
        cluster = make_admin_token(cluster)
    for entry in cluster.nodes:
        cluster = cluster.with_node(spawn(cluster, entry))
        cluster_file.save(cluster)  # after each start, so `down` finds whatever did start
    try:
        await wait_ready(cluster, timeout=timeout)
    except BaseException:
        for entry in cluster.nodes:
            kill_process(entry.pid)
        raise
    return cluster


async def wait_ready(
    cluster: ClusterFile, names: Iterable[str] | None = None, timeout: float = START_TIMEOUT
) -> None:
    """Until each node (of `names`) answers, reports every member of the cluster and takes client
    requests (a restarted one first has its links with its peers open: node/process.py `refusal`)."""
    wanted = set(cluster.names)
    reach = client_access(cluster)
    waiting = {n: cluster.node(n) for n in (names or cluster.names)}
    seen: dict[str, str] = {}

    failed: list[str] = []

    async def one(entry: NodeEntry, scope: trio.CancelScope) -> None:
        while True:
            if not pid_alive(entry.pid):
                # What it said as it stopped, else its log's last lines.
                why = last_words(entry.log, entry.id) or log_tail(entry.log)
                failed.append(f"node {entry.id} exited while starting: {why} (log {entry.log})")
                scope.cancel()  # no use waiting for the others
                return
            try:
                info = await rpc_once(entry.host, entry.port, "info", 1.0, entry.id, reach, counts=False)
                members = set(info.get("members", ()))
                serving = info.get("serving", True)  # a node of an older build has no such field
                seen[entry.id] = "knows " + ", ".join(sorted(members)) + ("" if serving else "; starting")
                if members >= wanted and serving:
                    return
            except (RpcError, trio.TooSlowError) as exc:
                seen[entry.id] = str(exc)
                if isinstance(exc, RpcError) and exc.code:  # refused (a token): waiting cannot help
                    failed.append(str(exc))
                    scope.cancel()
                    return
            await trio.sleep(POLL)

    with trio.move_on_after(timeout) as scope:
        async with trio.open_nursery() as nursery:
            for entry in waiting.values():
                nursery.start_soon(one, entry, nursery.cancel_scope)
    if failed:
        raise StartError(failed[0])
    if scope.cancelled_caught:
        states = "; ".join(f"{n}: {seen.get(n, 'no answer')}" for n in waiting)
        raise StartError(f"the cluster was not ready after {timeout:g} s ({states})")


def _signal(pid: int, sig: int) -> None:
    try:
        # Each node leads its own session and process group: signal the group.
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def kill_process(pid: int) -> bool:
    """SIGKILL a node process (a crash). False if it was not running."""
    if not pid_alive(pid):
        return False
    _signal(pid, signal.SIGKILL)
    child = CHILDREN.get(pid)
    if child is not None:
        child.wait(timeout=STOP_TIMEOUT)
    return True


async def wait_exit(pid: int, timeout: float) -> bool:
    with trio.move_on_after(timeout):
        while pid_alive(pid):
            await trio.sleep(POLL)
        return True
    return False


async def stop(entry: NodeEntry, timeout: float = STOP_TIMEOUT, reach: ClientAccess = PLAIN) -> str:
    """Stop one node cleanly if it lets us: RPC shutdown, then SIGTERM, then SIGKILL. Returns
    only once the process has exited (how it was stopped), or `STILL_RUNNING` if even SIGKILL
    did not end it within its grace period."""
    if not pid_alive(entry.pid):
        return "not running"
    with contextlib.suppress(RpcError, trio.TooSlowError):
        # Room for a TLS handshake on a busy machine: a shutdown that never arrived costs a SIGTERM.
        await rpc_once(entry.host, entry.port, "shutdown", SHUTDOWN_RPC_TIMEOUT, entry.id, reach)
    if await wait_exit(entry.pid, timeout):
        return "stopped"
    _signal(entry.pid, signal.SIGTERM)
    if await wait_exit(entry.pid, TERM_GRACE):
        return "terminated"
    _signal(entry.pid, signal.SIGKILL)
    if await wait_exit(entry.pid, KILL_GRACE):
        return "killed"
    return STILL_RUNNING


async def down(cluster: ClusterFile) -> dict[str, str]:
    """Stop every node; node -> how it stopped (`STILL_RUNNING` for one that did not exit).

    The cluster file forgets the pids of the nodes that exited only: one still running stays
    named, so `cluster status` and another `cluster down` can still find it."""
    outcome: dict[str, str] = {}

    reach = client_access(cluster)

    async def one(entry: NodeEntry) -> None:
        outcome[entry.id] = await stop(entry, reach=reach)

    async with trio.open_nursery() as nursery:
        for entry in cluster.nodes:
            nursery.start_soon(one, entry)
    nodes = tuple(n if outcome[n.id] == STILL_RUNNING else replace(n, pid=0) for n in cluster.nodes)
    cluster_file.save(replace(cluster, nodes=nodes, partitions=(), delays={}))
    return {n: outcome[n] for n in cluster.names}


async def start(cluster: ClusterFile, name: str, timeout: float = START_TIMEOUT) -> tuple[ClusterFile, bool]:
    """(Re)start one node with its data and ports; (new cluster file, whether it was started)."""
    entry = cluster.node(name)
    if pid_alive(entry.pid):
        return cluster, False
    cluster = cluster.with_node(spawn(cluster, entry))
    cluster_file.save(cluster)
    await wait_ready(cluster, [entry.id], timeout)
    # Give it back the faults in force: the rest of the cluster still applies them.
    entry, reach = cluster.node(name), client_access(cluster)
    if cluster.partitions:
        await rpc_once(entry.host, entry.port, "partition", 2.0, entry.id, reach, **partition_args(cluster))
    if cluster.delays:
        await rpc_once(entry.host, entry.port, "delay", 2.0, entry.id, reach, delays=cluster.delays)
    return cluster, True


async def start_many(
    cluster: ClusterFile, names: Iterable[str], timeout: float = START_TIMEOUT
) -> ClusterFile:
    """Start several stopped nodes together (they may need each other to be ready)."""
    names = [n for n in names if not pid_alive(cluster.node(n).pid)]
    for name in names:
        cluster = cluster.with_node(spawn(cluster, cluster.node(name)))
        cluster_file.save(cluster)
    await wait_ready(cluster, names, timeout)
    return cluster


def partition_args(cluster: ClusterFile) -> dict[str, Any]:
    return {"groups": [list(g) for g in cluster.partitions], "nodes": cluster.names}


async def broadcast(cluster: ClusterFile, op: str, **args: Any) -> dict[str, str]:
    """Send an admin RPC to every running node; node -> 'ok' or why not. A refusal (the token
    may not do it) raises ClientError: the operator's fault, not a node's state."""
    outcome: dict[str, str] = {}
    reach = client_access(cluster)
    refused: list[RpcError] = []

    async def one(entry: NodeEntry) -> None:
        if not pid_alive(entry.pid):
            outcome[entry.id] = "down"
            return
        try:
            await rpc_once(entry.host, entry.port, op, 2.0, entry.id, reach, **args)
            outcome[entry.id] = "ok"
        except (RpcError, trio.TooSlowError) as exc:
            outcome[entry.id] = str(exc) or "no answer"
            if isinstance(exc, RpcError) and exc.code:
                refused.append(exc)

    async with trio.open_nursery() as nursery:
        for entry in cluster.nodes:
            nursery.start_soon(one, entry)
    if refused:
        raise ClientError(refused[0].code, str(refused[0]))
    return outcome


async def set_faults(
    cluster: ClusterFile, partitions: list[list[str]] | None = None, delays: dict[str, float] | None = None
) -> tuple[ClusterFile, dict[str, str]]:
    """Apply partition groups and/or delays on every node and record them in the cluster file."""
    outcome: dict[str, str] = {}
    if partitions is not None:
        groups = partition_groups(partitions, cluster.names) if partitions else []
        cluster = replace(cluster, partitions=tuple(tuple(g) for g in groups))
        outcome = await (
            broadcast(cluster, "partition", **partition_args(cluster))
            if partitions
            else broadcast(cluster, "heal")
        )
    if delays is not None:
        cluster = replace(cluster, delays={n: ms for n, ms in delays.items() if ms > 0})
        outcome = await broadcast(cluster, "delay", delays=cluster.delays)
    cluster_file.save(cluster)
    return cluster, outcome
