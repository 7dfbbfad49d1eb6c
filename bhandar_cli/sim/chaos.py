"""Chaos runs: a seeded workload against a simulated cluster under faults, then the checker's verdict.

This module owns a run from options to report: it draws every parameter the options leave open
from the seed ("swarm" runs: each seed also picks its own cluster size, replication factor,
consistency levels, fault kinds and rates and timeouts), builds the cluster, runs the workload and
the fault injector on one event loop, heals everything, lets hints drain and reads every key at ALL
(read repair then makes the replicas converge; until anti-entropy exists that is what convergence
after a heal rests on; keys whose replicas still differ are read again, up to REPAIR_ROUNDS times,
and the summary says how many rounds it took), and hands the history and final state to the
checker.

One `random.Random(seed)` hands a child seed to each subsystem (parameters, cluster, workload,
faults), so a seed replays its run exactly, and fixing one option does not change the others.
"""

from __future__ import annotations

import gc
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from random import Random
from typing import Any

from bhandar_cli.core.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.messages import Failure, GetRequest, KeyspaceRequest, Result
from bhandar_cli.core.records import Record, merge_records, same_record
from bhandar_cli.core.ring import key_token
from bhandar_cli.sim.checker import CheckResult, History, check
from bhandar_cli.sim.cluster import SimCluster
from bhandar_cli.sim.faults import FAULT_KINDS, FaultInjector, FaultParams
from bhandar_cli.sim.workload import Workload, WorkloadParams, workload_keyspaces

LEVEL_SETS: tuple[tuple[str, ...], ...] = (
    ("ONE", "QUORUM", "ALL"),
    ("QUORUM",),
    ("ONE", "QUORUM"),
    ("QUORUM", "ALL"),
)
HEAL_TIMEOUT = 300.0  # simulated seconds allowed for hints to drain after the heal
REPAIR_ROUNDS = 4  # rounds of reads at ALL after the heal, for keys whose replicas still differ


@dataclass(frozen=True, slots=True)
class ChaosOptions:
    """What the user fixed; `None` means "draw it from the seed"."""

    seed: int
    ops: int
    nodes: int | None = None
    replicas: int | None = None
    faults: tuple[str, ...] | None = None
    consistency: str | None = None
    keys: int | None = None
    clients: int | None = None
    bugs: tuple[str, ...] = ()  # test-only: planted store bugs (NodeConfig.bugs)


@dataclass(frozen=True, slots=True)
class ChaosParams:
    """Every parameter of a run, resolved."""

    seed: int
    ops: int
    nodes: int
    zones: int
    vnodes: int
    replicas: int
    levels: tuple[str, ...]
    clients: int
    keys: int
    request_timeout: float
    gossip_interval: float
    phi_pause: float
    hint_interval: float
    think: float
    faults: FaultParams
    bugs: tuple[str, ...]
    cluster_seed: int
    workload_seed: int
    fault_seed: int


def draw_params(options: ChaosOptions) -> ChaosParams:
    """Resolve the options, drawing what they leave open from the seed (always in the same order)."""
    root = Random(options.seed)
    draw = Random(root.getrandbits(64))
    cluster_seed, workload_seed, fault_seed = root.getrandbits(64), root.getrandbits(64), root.getrandbits(64)
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
    kinds = tuple(k for k in FAULT_KINDS if draw.random() < 0.6) or (draw.choice(FAULT_KINDS),)
    interval = draw.uniform(0.2, 2.0)
    duration = draw.uniform(0.2, 3.0)
    down_share = draw.random()
    max_delay = draw.uniform(0.01, 1.5) * request_timeout
    max_loss = draw.uniform(0.02, 0.3)

    nodes = options.nodes if options.nodes is not None else nodes
    replicas = min(options.replicas if options.replicas is not None else replicas, nodes)
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
            kinds=options.faults if options.faults is not None else kinds,
            interval=interval,
            duration=duration,
            max_down=1 + int(down_share * (nodes - 1)),
            max_delay=max_delay,
            max_loss=max_loss,
        ),
        bugs=options.bugs,
        cluster_seed=cluster_seed,
        workload_seed=workload_seed,
        fault_seed=fault_seed,
    )


@dataclass(frozen=True, slots=True)
class ChaosReport:
    options: ChaosOptions
    params: ChaosParams
    check: CheckResult
    faults: dict[str, int]
    hints_stored: int
    hints_delivered: int
    hints_expired: int
    read_repairs: int
    messages: int
    dropped: int
    events: int
    sim_seconds: float
    workload_seconds: float  # simulated seconds until the last client operation finished
    real_seconds: float
    repair_rounds: int = 1  # rounds of reads at ALL it took the replicas to agree after the heal

    @property
    def ok(self) -> bool:
        return self.check.passed

    @property
    def events_per_second(self) -> float:
        return self.events / self.real_seconds if self.real_seconds > 0 else 0.0

    @property
    def ops_per_second(self) -> float:
        return self.check.ops / self.real_seconds if self.real_seconds > 0 else 0.0


def run_chaos(options: ChaosOptions, on_progress: Callable[[int], None] | None = None) -> ChaosReport:
    # A run allocates millions of small objects that live briefly; collecting the young generation
    # less often saves about 6% and changes nothing else.
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    try:
        return _run_chaos(options, on_progress)
    finally:
        gc.set_threshold(*thresholds)


def _run_chaos(options: ChaosOptions, on_progress: Callable[[int], None] | None) -> ChaosReport:
    started = time.perf_counter()  # real time is measured for the report only; nothing depends on it
    params = draw_params(options)
    config = NodeConfig(
        request_timeout=params.request_timeout,
        gossip_interval=params.gossip_interval,
        phi_pause=params.phi_pause,
        hint_delivery_interval=params.hint_interval,
        bugs=frozenset(params.bugs),
    )
    cluster = SimCluster(
        seed=params.cluster_seed, nodes=params.nodes, zones=params.zones, vnodes=params.vnodes, config=config
    )
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

    faults.stop()
    final, replicas, hints_left, rounds = _heal_and_collect(cluster, history, keyspaces)
    result = check(history, keyspaces, final, replicas, hints_left, config.max_vv_entries)
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
        messages=cluster.net.sent,
        dropped=cluster.net.dropped,
        events=cluster.loop.events,
        sim_seconds=cluster.now,
        workload_seconds=workload_seconds,
        real_seconds=time.perf_counter() - started,
        repair_rounds=rounds,
    )


def _create_keyspaces(cluster: SimCluster, keyspaces: Any) -> None:
    first = next(iter(cluster.hosts))
    for ks in keyspaces:
        result = cluster.call(first, KeyspaceRequest(cluster.new_rid(), ks))
        if isinstance(result, Failure):
            raise RuntimeError(f"could not create keyspace {ks.name}: {result.error}")
    cluster.run_for(0.5)  # let the schema reach every node before faults start


def _heal_and_collect(
    cluster: SimCluster, history: History, keyspaces: dict[str, KeyspaceDef]
) -> tuple[dict[tuple[str, str], Record | None], dict[tuple[str, str], dict[str, Record | None]], int, int]:
    """After the faults: drain hints, read every key at ALL (read repair), collect the replicas."""
    deadline = cluster.now + HEAL_TIMEOUT
    cluster.run_for(cluster.config.detection_bound())
    while cluster.hints_pending() and cluster.now < deadline:
        cluster.run_for(cluster.config.hint_delivery_interval)
    keys = sorted({(op.keyspace, op.key) for op in history.ops})
    # With pruned contexts merge is not associative (a dropped sibling's context may have been the
    # only thing covering another), so one round of read repair may leave replicas apart; the next
    # round settles them. Keys that still differ are read again, a few times at most.
    todo = keys
    rounds = 0
    while todo and rounds < REPAIR_ROUNDS:
        rounds += 1
        _read_all(cluster, todo, keyspaces)
        cluster.run_for(cluster.config.request_timeout * 2)  # repairs land
        todo = [k for k in todo if not _agree(_copies(cluster, keyspaces[k[0]], k[1]).values())]
    final: dict[tuple[str, str], Record | None] = {}
    replicas: dict[tuple[str, str], dict[str, Record | None]] = {}
    for ks_name, key in keys:
        ks = keyspaces[ks_name]
        copies = _copies(cluster, ks, key)
        merged: Record | None = None
        for record in copies.values():
            merged = merge_records(ks.policy, merged, record)
        replicas[(ks_name, key)] = copies
        final[(ks_name, key)] = merged
    return final, replicas, cluster.hints_pending(), rounds


def _copies(cluster: SimCluster, ks: KeyspaceDef, key: str) -> dict[str, Record | None]:
    home = cluster.ring.preference_list(key_token(ks.name, key), ks.n)
    return {node: cluster.hosts[node].store.get(ks.name, key) for node in home}


def _agree(records: Any) -> bool:
    records = list(records)
    return all(same_record(records[0], other) for other in records[1:])


def _read_all(cluster: SimCluster, keys: list[tuple[str, str]], keyspaces: dict[str, KeyspaceDef]) -> int:
    """Read every key at ALL through its first home replica; returns how many reads failed."""
    answers: list[Result] = []
    for ks_name, key in keys:
        home = cluster.ring.preference_list(key_token(ks_name, key), keyspaces[ks_name].n)
        cluster.submit(home[0], GetRequest(cluster.new_rid(), ks_name, key, "ALL"), answers.append)
    cluster.loop.run_until_true(lambda: len(answers) == len(keys), cluster.now + 30.0)
    return sum(1 for a in answers if isinstance(a, Failure)) + len(keys) - len(answers)


# --- reporting -----------------------------------------------------------------------------------


def reproduce_command(options: ChaosOptions) -> str:
    """The command line that replays this run (every option that was fixed)."""
    parts = ["bhandar", "chaos", "--seed", str(options.seed), "--ops", str(options.ops)]
    if options.nodes is not None:
        parts += ["--nodes", str(options.nodes)]
    if options.replicas is not None:
        parts += ["--replicas", str(options.replicas)]
    if options.faults is not None:
        parts += ["--faults", ",".join(options.faults) or "none"]
    if options.consistency is not None:
        parts += ["--consistency", options.consistency]
    if options.keys is not None:
        parts += ["--keys", str(options.keys)]
    if options.clients is not None:
        parts += ["--clients", str(options.clients)]
    for bug in options.bugs:
        parts += ["--bug", bug]
    return shlex.join(parts)


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole else "-"


def render_summary(report: ChaosReport) -> str:
    """The deterministic summary: the same seed and options print the same text, byte for byte."""
    p, c = report.params, report.check
    faults = ", ".join(f"{k} {v}" for k, v in report.faults.items()) or "none"
    kinds = " ".join(f"{k} {v}" for k, v in c.by_kind.items())
    lines = [
        f"chaos seed {p.seed}: {c.ops} operations by {p.clients} clients on {p.keys} keys per keyspace",
        f"  cluster        {p.nodes} nodes in {p.zones} zones, {p.vnodes} vnodes, N={p.replicas}, "
        f"levels {','.join(p.levels)}",
        f"  timeouts       request {p.request_timeout:.3f} s, gossip every {p.gossip_interval:.3f} s, "
        f"phi pause {p.phi_pause:.3f} s, hints every {p.hint_interval:.3f} s",
        f"  faults         {','.join(p.faults.kinds) or 'none'}: every {p.faults.interval:.2f} s, "
        f"lasting {p.faults.duration:.2f} s, at most {p.faults.max_down} down, "
        f"delay up to {p.faults.max_delay * 1000:.0f} ms, loss up to {p.faults.max_loss:.0%}",
        f"  injected       {faults}",
        f"operations       {c.ops} ({kinds})",
        f"  succeeded      {c.ok_ops}  availability {_pct(c.ok_ops, c.ops)}",
        f"  acked writes   {c.acked_writes}",
        f"  lost writes    {c.lost_writes}",
        f"  stale reads    {c.stale_reads} of {c.reads} reads ({c.strict_stale_reads} under strict quorum)",
        f"  siblings seen  {c.reads_with_siblings} reads with siblings, at most {c.max_siblings}; "
        f"{c.stored_twice} puts stored twice (duplicated and re-sent across a restart)",
        f"  counters       {c.counter_keys} keys, {c.increments} increments, {c.retries} retried attempts",
        f"hints            stored {report.hints_stored}, delivered {report.hints_delivered}, "
        f"expired {report.hints_expired}",
        f"read repairs     {report.read_repairs}",
        f"network          {report.messages} messages, {report.dropped} dropped",
        f"checked          {c.keys_checked} keys after the heal and {report.repair_rounds} rounds of "
        f"reads at ALL ({c.pruned_keys} keys with pruned contexts: resurrection not judged)",
        f"simulated        {report.sim_seconds:.3f} s ({report.workload_seconds:.3f} s of workload), "
        f"{report.events} events",
    ]
    if c.passed:
        lines.append("result           OK: no violations")
    else:
        lines.append(f"result           FAILED: {len(c.violations)} violations")
    return "\n".join(lines) + "\n"


def render_timing(report: ChaosReport) -> str:
    """Real-time figures, on their own line because they differ from run to run."""
    return (
        f"real time        {report.real_seconds:.2f} s, {report.events_per_second:,.0f} events/s, "
        f"{report.ops_per_second:,.0f} ops/s\n"
    )


def report_json(report: ChaosReport) -> dict[str, Any]:
    p, c = report.params, report.check
    return {
        "cmd": "chaos",
        "seed": p.seed,
        "ops": c.ops,
        "ok_ops": c.ok_ops,
        "acked_writes": c.acked_writes,
        "lost_writes": c.lost_writes,
        "availability": round(c.availability, 6),
        "stale_reads": c.stale_reads,
        "strict_stale_reads": c.strict_stale_reads,
        "reads": c.reads,
        "reads_with_siblings": c.reads_with_siblings,
        "max_siblings": c.max_siblings,
        "stored_twice": c.stored_twice,
        "increments": c.increments,
        "retries": c.retries,
        "hints_stored": report.hints_stored,
        "hints_delivered": report.hints_delivered,
        "hints_expired": report.hints_expired,
        "read_repairs": report.read_repairs,
        "repair_rounds": report.repair_rounds,
        "pruned_keys": c.pruned_keys,
        "messages": report.messages,
        "dropped": report.dropped,
        "faults": report.faults,
        "params": {
            "nodes": p.nodes,
            "zones": p.zones,
            "vnodes": p.vnodes,
            "replicas": p.replicas,
            "levels": list(p.levels),
            "clients": p.clients,
            "keys": p.keys,
            "request_timeout": round(p.request_timeout, 6),
            "fault_kinds": list(p.faults.kinds),
        },
        "events": report.events,
        "sim_seconds": round(report.sim_seconds, 6),
        "real_seconds": round(report.real_seconds, 3),
        "events_per_second": round(report.events_per_second),
        "ops_per_second": round(report.ops_per_second),
        "ok": report.ok,
        "violations": [str(v) for v in c.violations[:100]],
        "reproduce": None if report.ok else reproduce_command(report.options),
    }


REAL_TIME_FIELDS = ("real_seconds", "events_per_second", "ops_per_second")
