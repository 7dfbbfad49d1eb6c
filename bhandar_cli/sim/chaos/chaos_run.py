"""Chaos runs: a seeded workload against a simulated cluster under faults, then the checker's verdict.

This module owns a run from options to report: it draws every parameter the options leave open
from the seed ("swarm" runs: each seed also picks its own cluster size, replication factor,
consistency levels, fault kinds and rates, timeouts, hint lifetime and storage), builds the
cluster, runs the workload and the fault injector (network faults, crashes, joins and
decommissions) on one event loop, heals and converges by anti-entropy (`heal.py`), and hands
the history and the final replicas to the checker, with the times the ring was changing.
`report.py` renders the report.

With `storage="lsm"` every node runs on the LSM engine over a simulated disk, and a crash loses
the node's unsynced writes, may tear the last one, or strikes inside a disk operation (see
`storage_faults.py`). Before the repair rounds the heal flushes and fully compacts every live
store, as an operator would before a repair: it puts the recovered data through a compaction too,
and a Merkle tree built from one compacted table is several times cheaper than one that merges
memtable operands on every read.

One `random.Random(seed)` hands a child seed to each subsystem (parameters, cluster, workload,
faults, disks), so a seed replays its run exactly, and fixing one option does not change the
others. Parameters added later are drawn after the older ones, so old seeds keep their draws.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from random import Random
from typing import Any

from bhandar_cli.core.membership import Ring
from bhandar_cli.core.model import LEVELS, KeyspaceDef, NodeConfig
from bhandar_cli.core.protocol import Failure, KeyspaceRequest
from bhandar_cli.sim import History, SimCluster, Violation
from bhandar_cli.sim.chaos.chaos_options import DEFAULT_HINT_AGE, ChaosOptions, ChaosParams
from bhandar_cli.sim.chaos.fault_injector import (
    FAULT_KINDS,
    MEMBERSHIP_KINDS,
    NETWORK_KINDS,
    FaultInjector,
    FaultParams,
)
from bhandar_cli.sim.chaos.heal import heal
from bhandar_cli.sim.chaos.report import (
    REAL_TIME_FIELDS,
    ChaosReport,
    MovementSummary,
    render_summary,
    render_timing,
    report_json,
    reproduce_command,
)
from bhandar_cli.sim.chaos.storage_faults import STORAGE_KINDS, LSMHosts
from bhandar_cli.sim.chaos.workload import Workload, WorkloadParams, workload_keyspaces
from bhandar_cli.sim.checker import check_history

__all__ = [
    "REAL_TIME_FIELDS",
    "ChaosReport",
    "draw_params",
    "render_summary",
    "render_timing",
    "report_json",
    "reproduce_command",
    "run_chaos",
]

LEVEL_SETS: tuple[tuple[str, ...], ...] = (
    LEVELS,
    ("QUORUM",),
    ("ONE", "QUORUM"),
    ("QUORUM", "ALL"),
)


def draw_params(options: ChaosOptions) -> ChaosParams:
    """Resolve the options, drawing what they leave open from the seed (always in the same order)."""
    root = Random(options.seed)
    draw = Random(root.getrandbits(64))
    cluster_seed, workload_seed, fault_seed = root.getrandbits(64), root.getrandbits(64), root.getrandbits(64)
    storage_seed = root.getrandbits(64)
    nodes = draw.randint(3, 7)
    zones = draw.randint(1, 3)
    vnodes = draw.choice((4, 8, 16))
    replicas = draw.choice((2, 3, 3, 3, 4, 5))
    levels = draw.choice(LEVEL_SETS)
    clients = draw.randint(4, 24)
    keys = draw.choice((3, 10, 30, 100))
    request_timeout = draw.uniform(0.3, 1.5)
    gossip_interval = draw.uniform(0.1, 0.5)
    phi_pause = draw.uniform(0.3, 1.0)
    hint_interval = draw.uniform(0.1, 1.0)
    think = draw.uniform(0.001, 0.02)
    kinds = tuple(k for k in NETWORK_KINDS if draw.random() < 0.6) or (draw.choice(NETWORK_KINDS),)
    interval = draw.uniform(0.2, 2.0)
    duration = draw.uniform(0.2, 3.0)
    down_share = draw.random()
    max_delay = draw.uniform(0.01, 1.5) * request_timeout
    max_loss = draw.uniform(0.02, 0.3)
    # Drawn after everything older, so the seeds of earlier suites keep their parameters.
    membership = tuple(k for k in MEMBERSHIP_KINDS if draw.random() < 0.4)
    storage = "lsm" if draw.random() < 0.3 else "memory"
    # Hints that expire within seconds leave convergence to anti-entropy alone.
    hint_max_age = draw.uniform(0.5, 5.0) if draw.random() < 0.3 else DEFAULT_HINT_AGE
    # Half the runs boot as node processes do: seeds by address, the cluster found by gossip,
    # restarted nodes sometimes at a new address.
    addressing = draw.random() < 0.5

    nodes = options.nodes if options.nodes is not None else nodes
    replicas = min(options.replicas if options.replicas is not None else replicas, nodes)
    fault_kinds = options.faults if options.faults is not None else kinds + membership
    return ChaosParams(
        seed=options.seed,
        ops=options.ops,
        nodes=nodes,
        zones=min(zones, nodes),
        vnodes=vnodes,
        replicas=replicas,
        levels=(options.consistency,) if options.consistency is not None else levels,
        clients=options.clients if options.clients is not None else clients,
        keys=options.keys if options.keys is not None else keys,
        request_timeout=request_timeout,
        gossip_interval=gossip_interval,
        phi_pause=phi_pause,
        hint_interval=hint_interval,
        think=think,
        faults=FaultParams(
            kinds=tuple(k for k in FAULT_KINDS if k in fault_kinds),
            interval=interval,
            duration=duration,
            max_down=1 + int(down_share * (nodes - 1)),
            max_delay=max_delay,
            max_loss=max_loss,
            # Room for a few joins; a decommission leaves at least max(N) + 1 normal nodes.
            max_nodes=max(nodes, replicas + 2) + 2,
            min_normal=replicas + 1,
        ),
        bugs=options.bugs,
        cluster_seed=cluster_seed,
        workload_seed=workload_seed,
        fault_seed=fault_seed,
        hint_max_age=hint_max_age,
        storage=options.storage if options.storage is not None else storage,
        storage_seed=storage_seed,
        addressing=addressing,
        hot=options.hot,
    )


def run_chaos(
    options: ChaosOptions, on_progress: Callable[[int], None] | None = None, keep_history: bool = False
) -> ChaosReport:
    """The run of `options`; with `keep_history` its report holds every client operation too."""
    # A run allocates millions of small objects that live briefly; collecting the young generation
    # less often saves about 6% and changes nothing else.
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    try:
        return _run_chaos(options, on_progress, keep_history)
    finally:
        gc.set_threshold(*thresholds)


def _run_chaos(
    options: ChaosOptions, on_progress: Callable[[int], None] | None, keep_history: bool
) -> ChaosReport:
    started = time.perf_counter()  # real time is measured for the report only; nothing depends on it
    cpu_started = time.process_time()
    params = draw_params(options)
    if params.storage not in STORAGE_KINDS:
        raise ValueError(f"unknown storage {params.storage!r} (use {' or '.join(STORAGE_KINDS)})")
    config = NodeConfig(
        request_timeout=params.request_timeout,
        gossip_interval=params.gossip_interval,
        phi_pause=params.phi_pause,
        hint_delivery_interval=params.hint_interval,
        hint_max_age=params.hint_max_age,
        bugs=frozenset(params.bugs),
    )
    disks = LSMHosts(Random(params.storage_seed)) if params.storage == "lsm" else None
    cluster = _build_cluster(params, config, disks)
    keyspaces = {ks.name: ks for ks in workload_keyspaces(params.replicas)}
    _create_keyspaces(cluster, keyspaces.values())

    history = History()
    workload = Workload(
        cluster,
        WorkloadParams(
            ops=params.ops,
            clients=params.clients,
            keys=params.keys,
            levels=params.levels,
            client_timeout=2 * params.request_timeout + 0.5,
            think=params.think,
            hot=params.hot,
        ),
        Random(params.workload_seed),
        history,
        on_progress,
    )
    faults = FaultInjector(cluster, params.faults, Random(params.fault_seed))
    faults.start()
    workload.start()
    while not workload.done:
        cluster.loop.run()
    workload_seconds = cluster.now
    hot = hot_keys(cluster) if params.hot else None

    healed = heal(cluster, faults, history, keyspaces, None if disks is None else disks.compact)
    windows = _movement_windows(faults, config.detection_bound())
    result = check_history(history, keyspaces, healed.final, healed.replicas, healed.hints_left, windows)
    problems = healed.problems + _internal_errors(cluster)
    if problems:
        result = replace(result, violations=result.violations + tuple(problems))
    metrics = cluster.metrics()
    return ChaosReport(
        options=options,
        params=params,
        check=result,
        faults={k: faults.injected[k] for k in FAULT_KINDS if faults.injected[k]},
        hints_stored=metrics.hints_stored,
        hints_delivered=metrics.hints_delivered,
        hints_expired=metrics.hints_expired,
        read_repairs=metrics.read_repairs,
        messages=cluster.model.sent,
        dropped=cluster.model.dropped,
        events=cluster.loop.events,
        sim_seconds=cluster.now,
        workload_seconds=workload_seconds,
        real_seconds=time.perf_counter() - started,
        cpu_seconds=time.process_time() - cpu_started,
        repair_rounds=healed.rounds,
        address_moves=cluster.address_moves,
        repair_keys=healed.repair_keys,
        disagreeing_keys=healed.disagreeing,
        movements=_movements(faults, healed.ring),
        storage=None if disks is None else disks.finish({n: h.store for n, h in cluster.hosts.items()}),
        hot=hot,
        spans=tuple((str(k), str(w), float(a), float(b)) for k, w, a, b in faults.spans),
        history=tuple(
            (op.invoked, op.completed, op.client, op.kind, f"{op.keyspace}/{op.key}", op.outcome, op.code)
            for op in history.ops
        )
        if keep_history
        else (),
    )


def hot_keys(cluster: SimCluster, n: int = 3) -> dict[str, Any]:
    """The `hot` view of the cluster now: every live node's sketch combined, as the client does."""
    from bhandar_cli.core.roles import HotSketches

    sketches = HotSketches()
    for name, host in sorted(cluster.hosts.items()):
        if host.node is not None:
            sketches.add(name, host.node.info(cluster.now, counts=False))
    return sketches.view(cluster.ring_view(), n)


def _build_cluster(params: ChaosParams, config: NodeConfig, disks: LSMHosts | None) -> SimCluster:
    """The simulated cluster, its nodes on in-memory stores or on LSM engines over crashable disks."""
    storage: dict[str, Any] = {}
    if disks is not None:
        storage = {
            **disks.hooks(),
            "sync_delay": _fsync_seconds,
            "job_delay": _job_seconds,
        }
    return SimCluster(
        seed=params.cluster_seed,
        nodes=params.nodes,
        zones=params.zones,
        vnodes=params.vnodes,
        config=config,
        addressing=params.addressing,
        **storage,
    )


def _fsync_seconds(rng: Random) -> float:
    """How long one fsync of a simulated disk takes: 0.2 to 3 ms, as on an SSD. Writes that arrive
    meanwhile wait for the next step: group commit, as in production."""
    return rng.uniform(0.0002, 0.003)


def _job_seconds(rng: Random) -> float:
    """How long a background flush or compaction takes to write its table: 5 to 100 ms. The node
    goes on meanwhile, so crashes and reads land while jobs are in flight."""
    return rng.uniform(0.005, 0.1)


def _internal_errors(cluster: SimCluster) -> list[Violation]:
    """Bugs the nodes hit: a node that crashed on an exception, or messages dropped because handling
    them raised. Production survives both (one node, one message); a checker must not."""
    found = [
        Violation("internal_error", "*", "*", f"{node} at {t:.3f}s: {e}")
        for t, node, e in cluster.internal_errors
    ]
    for name, host in sorted(cluster.hosts.items()):
        if host.errors:
            found.append(
                Violation(
                    "internal_error", "*", "*", f"{name} dropped {host.errors} message(s) it could not handle"
                )
            )
    return found


def _create_keyspaces(cluster: SimCluster, keyspaces: Iterable[KeyspaceDef]) -> None:
    # As `cluster up` does, wait until the nodes have found each other (process-mode membership).
    if not cluster.loop.run_until_true(cluster.membership_settled, cluster.now + 60.0):
        raise RuntimeError(f"the nodes did not find each other in 60 s: {cluster.hosts}")
    first = next(iter(cluster.hosts))
    for ks in keyspaces:
        result = cluster.call(first, KeyspaceRequest(cluster.new_rid(), ks))
        if isinstance(result, Failure):
            raise RuntimeError(f"could not create keyspace {ks.name}: {result.error}")
    cluster.run_for(0.5)  # let the schema reach every node before faults start


def _movement_windows(faults: FaultInjector, settle: float) -> list[tuple[float, float]]:
    """When the ring was changing: from each movement's start until every live node saw it end,
    plus `settle` seconds for nodes that were down then to hear of it once back."""
    windows = [(m.started, m.finished + settle) for m in faults.movements]
    if faults.movement is not None:
        windows.append((faults.movement.started, math.inf))
    return windows


def _movements(faults: FaultInjector, ring: Ring) -> MovementSummary:
    done = faults.movements

    def names(kind: str, outcome: str) -> tuple[str, ...]:
        return tuple(m.node for m in done if m.kind == kind and m.outcome == outcome)

    moving = faults.movement
    return MovementSummary(
        joined=names("join", "joined"),
        left=names("decommission", "left"),
        aborted=names("decommission", "aborted"),
        unfinished=() if moving is None else (moving.node,),
        ring=tuple(sorted(ring.nodes)),
    )
