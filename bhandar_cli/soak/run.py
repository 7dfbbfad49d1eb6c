"""`bhandar soak`: hours of a cluster's life in minutes, on real processes, and a verdict.

A soak runs clients (soak/load.py) against a process cluster for a while, with a fault
schedule drawn from its seed (soak/faults.py): crashes by SIGKILL and restarts, partitions
and heals, one join and one decommission. Then it heals everything, restarts what is down, waits
(bounded) until the replicas converge, asking the nodes for an anti-entropy repair now and then,
reads every key's record from each of its home replicas (the ring of the nodes in service at the
end), and hands the history and those records to the chaos checker (sim/checker/check.py): nothing
acknowledged lost or resurrected, counters within what acknowledged and attempted increments
allow, every replica the same.

Without a cluster directory the soak starts its own 5-node cluster in a temporary directory
(`own_cluster`; `bhandar soak` removes it afterwards, or keeps it with the nodes' logs when the
soak failed).
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import TYPE_CHECKING, Any

import trio

from bhandar_cli.core.membership import key_token
from bhandar_cli.core.model import BadInput, ClientError, KeyspaceDef, Record, Unavailable, merge_records
from bhandar_cli.fleet import down as supervisor_down
from bhandar_cli.fleet import load, up
from bhandar_cli.node import records_from_plain
from bhandar_cli.node.net import RpcError
from bhandar_cli.sim import CheckResult, History
from bhandar_cli.sim.checker import check_history
from bhandar_cli.soak.faults import FAULT_ERRORS, FaultLog, FaultSchedule, FaultTimes
from bhandar_cli.soak.load import KEYSPACES, LoadStats, SoakClient

if TYPE_CHECKING:
    from bhandar_cli.client import Client, TcpBackend

OWN_CLUSTER_NODES = 5
REPAIR_EVERY = 10.0  # seconds between repair requests while waiting for convergence
POLL = 0.5


@dataclass(frozen=True)
class SoakOptions:
    seconds: float
    seed: int = 1
    clients: int = 8
    keys: int = 40  # per keyspace
    faults: FaultTimes = field(default_factory=FaultTimes)
    converge_timeout: float = 120.0


@dataclass
class SoakProgress:
    """What the live view shows: updated by the clients and the fault schedule as they go."""

    started: float = 0.0
    phase: str = "starting"  # load | converging | checking | done
    stats: LoadStats = field(default_factory=LoadStats)
    faults: FaultLog = field(default_factory=FaultLog)


@dataclass(frozen=True)
class Convergence:
    converged: bool
    seconds: float
    problems: tuple[str, ...]


async def run_soak(
    client: Client[TcpBackend], options: SoakOptions, progress: SoakProgress
) -> dict[str, Any]:
    """Load and faults for `options.seconds`, then heal, converge and check; the summary."""
    keyspaces = await prepare_keyspaces(client)
    rng = Random(options.seed)
    history = History()
    progress.started, progress.phase = trio.current_time(), "load"
    stop = trio.Event()
    clients = [
        SoakClient(i, client.backend, history, progress.stats, Random(rng.getrandbits(64)), options.keys)
        for i in range(options.clients)
    ]
    schedule = FaultSchedule(client, Random(rng.getrandbits(64)), progress.faults, options.faults)
    async with trio.open_nursery() as nursery:
        for each in clients:
            nursery.start_soon(each.run, stop)
        await schedule.run(options.seconds)
        await trio.sleep_until(progress.started + options.seconds)
        stop.set()
    progress.phase = "converging"
    convergence = await heal_and_converge(client, options.converge_timeout)
    progress.phase = "checking"
    held = await collect(client.backend, history, keyspaces)
    result = check_history(
        history,
        keyspaces,
        held.final,
        held.replicas,
        held.hints_left,
        progress.faults.movements,
    )
    progress.phase = "done"
    return summary(options, progress, result, convergence, held.unreadable, client.backend.cluster.dir)


async def prepare_keyspaces(client: Client[TcpBackend]) -> dict[str, KeyspaceDef]:
    """Create the soak's keyspaces (or find them, from an earlier soak); their definitions."""
    found: dict[str, KeyspaceDef] = {}
    for wanted in KEYSPACES:
        made = await client.admin.keyspace_create(wanted.name, wanted.policy)
        if made["policy"] != wanted.policy:
            raise BadInput(
                f"keyspace {wanted.name} exists with policy {made['policy']}; the soak needs {wanted.policy}"
            )
        found[wanted.name] = KeyspaceDef(made["name"], made["policy"], made["n"], made["quorum"])
    return found


async def heal_and_converge(client: Client[TcpBackend], timeout: float) -> Convergence:
    """Heal the network, restart every node that is down, then wait until no replica differs and
    no hint is held for a live node, asking for a repair every REPAIR_EVERY seconds."""
    backend = client.backend
    started = trio.current_time()
    problems: list[str] = []
    down: list[str] = []  # a node that does not come back leaves the cluster unconverged
    with trio.move_on_after(timeout):
        await client.admin.heal()
        for name in backend.names:
            if not backend.is_alive(name):
                try:
                    await client.admin.revive(name)
                except FAULT_ERRORS as exc:
                    down.append(f"{name} did not restart: {exc}")
        next_repair = trio.current_time() + REPAIR_EVERY
        while problems := await backend.convergence_problems():
            if trio.current_time() >= next_repair:
                try:
                    await client.admin.repair()
                except ClientError as exc:
                    problems.append(f"repair: {exc}")
                next_repair = trio.current_time() + REPAIR_EVERY
            await trio.sleep(POLL)
        return Convergence(not down, trio.current_time() - started, tuple(down))
    problems = down + (problems or ["the heal or a restart timed out"])
    return Convergence(False, trio.current_time() - started, tuple(problems))


@dataclass
class Collected:
    """What the replicas hold after the heal, for the checker."""

    final: dict[tuple[str, str], Record | None] = field(default_factory=dict)  # merged per key
    replicas: dict[tuple[str, str], dict[str, Record | None]] = field(default_factory=dict)
    hints_left: int = 0  # held for live nodes
    unreadable: list[str] = field(default_factory=list)  # home replicas that did not answer


async def collect(backend: Any, history: History, keyspaces: dict[str, KeyspaceDef]) -> Collected:
    """Each key's record at each home replica (by the ring of the members now), their merge, and
    the hints still held for live nodes. A replica that does not answer is left out and named:
    it is not taken for an empty one."""
    ring = backend.ring
    out = Collected()
    for ks_name, key in sorted({(op.keyspace, op.key) for op in history.ops}):
        ks = keyspaces[ks_name]
        copies: dict[str, Record | None] = {}
        for node in ring.preference_list(key_token(ks_name, key), ks.n):
            try:
                copies[node] = await _own_record(backend, node, ks_name, key)
            except Unavailable as exc:
                out.unreadable.append(str(exc))
        merged: Record | None = None
        for record in copies.values():
            merged = merge_records(ks.policy, merged, record)
        out.replicas[(ks_name, key)] = copies
        out.final[(ks_name, key)] = merged
    for name in backend.names:
        held = await backend.node_hints(name)
        out.hints_left += sum(q["count"] for q in held if q["target"] in backend.names)
    return out


async def _own_record(backend: Any, node: str, keyspace: str, key: str) -> Record | None:
    """What `node` stores for the key; a node that does not answer is not taken for an empty one."""
    for _ in range(3):
        try:
            plain = await backend.rpc(node, "records", keyspace=keyspace, key=key)
            return records_from_plain(plain)[0]
        except RpcError as exc:
            error = exc
            await trio.sleep(POLL)
    raise Unavailable(f"node {node} did not say what it holds for {keyspace}/{key}: {error}")


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


def summary(
    options: SoakOptions,
    progress: SoakProgress,
    result: CheckResult,
    convergence: Convergence,
    unreadable: list[str],
    where: str,
) -> dict[str, Any]:
    stats = progress.stats
    latencies = sorted(stats.latencies_ms)
    lost = [str(v) for v in result.violations if v.kind == "lost_write"]
    counters = [str(v) for v in result.violations if v.kind == "counter"]
    ok = result.passed and convergence.converged and not unreadable
    return {
        "cmd": "soak",
        "ok": ok,
        "cluster": where,
        "seed": options.seed,
        "seconds": options.seconds,
        "clients": options.clients,
        "operations": {
            "total": stats.total,
            "by_kind": {kind: dict(c) for kind, c in sorted(stats.outcomes.items())},
            "ops_per_s": round(stats.total / options.seconds, 1) if options.seconds else 0.0,
        },
        "availability": round(stats.acknowledged / stats.total, 4) if stats.total else 1.0,
        "latency_ms": {
            "p50": round(percentile(latencies, 0.50), 2),
            "p99": round(percentile(latencies, 0.99), 2),
            "max": round(latencies[-1], 2) if latencies else 0.0,
        },
        "faults": dict(sorted(progress.faults.counts.items())),
        "fault_errors": list(progress.faults.errors),
        "lost_writes": lost,
        "counter_violations": counters,
        "violations": [str(v) for v in result.violations],
        "converged": convergence.converged,
        "convergence_s": round(convergence.seconds, 2),
        "not_converged": [*convergence.problems, *unreadable],
        "checked": {
            "keys": result.keys_checked,
            "acknowledged_writes": result.acked_writes,
            "increments": result.increments,
            "stale_reads": result.stale_reads,
            "reads_with_siblings": result.reads_with_siblings,
        },
    }


@asynccontextmanager
async def own_cluster() -> AsyncIterator[Path]:
    """A fresh 5-node cluster in a new temporary directory, stopped afterwards (the directory,
    with the nodes' logs, is the caller's to remove)."""
    directory = Path(tempfile.mkdtemp(prefix="bhandar-soak-")) / "cluster"
    await up(directory, OWN_CLUSTER_NODES)
    try:
        yield directory
    finally:
        with trio.CancelScope(shield=True):
            await supervisor_down(load(directory))
