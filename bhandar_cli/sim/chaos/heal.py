"""The end of a chaos run: heal the faults, let the ring settle, converge by anti-entropy, collect.

After the workload, `heal` stops the faults (every crashed node restarts, the network heals), waits
for the range movement in progress to finish and for hints to drain (or expire: some runs draw a
hint lifetime of seconds), then leaves convergence to anti-entropy: `repair` on each live node that
replicates a key whose replicas differ, round after round, until every key's replicas agree (at
most REPAIR_ROUNDS rounds). Replicas are taken from the ring as the live nodes see it at the end,
so nodes that joined count and decommissioned ones do not; the live nodes must agree on that ring.

Problems of the heal itself (a movement that never finished, ring views that still differ, a
repair that failed) come back as violations for the checker's verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bhandar_cli.core.membership import Ring, key_token
from bhandar_cli.core.model import KeyspaceDef, Record, Store, merge_records, same_record
from bhandar_cli.core.protocol import RepairRequest, RepairResult, Result
from bhandar_cli.sim import History, SimCluster, Violation
from bhandar_cli.sim.chaos.fault_injector import FaultInjector

HEAL_TIMEOUT = 300.0  # simulated seconds allowed for movements to finish and hints to drain
REPAIR_ROUNDS = 6  # rounds of `repair` after the heal, at most
REPAIR_TIMEOUT = 60.0  # simulated seconds one node's `repair` may take


@dataclass
class Healed:
    """What the heal leaves for the checker, and what it took to get there."""

    final: dict[tuple[str, str], Record | None]
    replicas: dict[tuple[str, str], dict[str, Record | None]]
    hints_left: int
    rounds: int
    repair_keys: int
    disagreeing: int
    problems: list[Violation]
    ring: Ring  # the ring the replicas were judged by


def heal(
    cluster: SimCluster,
    faults: FaultInjector,
    history: History,
    keyspaces: dict[str, KeyspaceDef],
    compact: Callable[[Store], None] | None = None,
) -> Healed:
    """Stop the faults, let the movement in progress finish and hints drain, `compact` every live
    store (if given), then repair round after round until every key's replicas agree; collect the
    replicas."""
    deadline = cluster.now + HEAL_TIMEOUT
    faults.stop()
    problems: list[Violation] = []
    if not cluster.loop.run_until_true(lambda: faults.settled, deadline):
        mv = faults.movement
        assert mv is not None
        detail = f"the {mv.kind} of {mv.node} did not finish within {HEAL_TIMEOUT:g} s of the heal"
        problems.append(Violation("movement_stuck", "*", "*", detail))
    cluster.run_for(cluster.config.detection_bound())
    while cluster.hints_pending() and cluster.now < deadline:
        cluster.run_for(cluster.config.hint_delivery_interval)
    ring = _agreed_ring(cluster, problems)
    if compact is not None:
        for name in cluster.members:
            if cluster.is_alive(name):
                compact(cluster.hosts[name].store)

    keys = sorted({(op.keyspace, op.key) for op in history.ops})
    todo = [k for k in keys if not _agree(_copies(cluster, ring, keyspaces[k[0]], k[1]).values())]
    disagreeing = len(todo)
    # A round of repair may still leave replicas apart (a node that had not taken a hint yet when
    # its peer was repaired); the next round settles them.
    rounds = repair_keys = 0
    while todo and rounds < REPAIR_ROUNDS:
        rounds += 1
        repair_keys += _repair_round(cluster, ring, keyspaces, todo, problems)
        todo = [k for k in todo if not _agree(_copies(cluster, ring, keyspaces[k[0]], k[1]).values())]

    final: dict[tuple[str, str], Record | None] = {}
    replicas: dict[tuple[str, str], dict[str, Record | None]] = {}
    for ks_name, key in keys:
        ks = keyspaces[ks_name]
        copies = _copies(cluster, ring, ks, key)
        merged: Record | None = None
        for record in copies.values():
            merged = merge_records(ks.policy, merged, record)
        replicas[(ks_name, key)] = copies
        final[(ks_name, key)] = merged
    hints_left = cluster.hints_pending()
    return Healed(final, replicas, hints_left, rounds, repair_keys, disagreeing, problems, ring)


def _agreed_ring(cluster: SimCluster, problems: list[Violation]) -> Ring:
    """The ring every live node sees; a violation if their views still differ after the heal."""
    views: dict[str, Ring] = {}
    for name in cluster.members:
        node = cluster.hosts[name].node
        if node is not None:
            views[name] = node.ring
    ring = cluster.ring_view()
    shape = (ring.tokens_by_node(), ring.zones)
    differ = sorted(n for n, r in views.items() if (r.tokens_by_node(), r.zones) != shape)
    if differ:
        detail = f"{', '.join(differ)} see a different ring than {cluster.members[0]} after the heal"
        problems.append(Violation("ring_views_differ", "*", "*", detail))
    return ring


def _repair_round(
    cluster: SimCluster,
    ring: Ring,
    keyspaces: dict[str, KeyspaceDef],
    todo: list[tuple[str, str]],
    problems: list[Violation],
) -> int:
    """One round of anti-entropy: `repair` on every live node, in turn, of the keyspaces whose
    replicas differ; returns the keys exchanged. A node that replicates none of the keys that
    differ is skipped: its comparisons could only find them equal (and each costs a full scan)."""
    involved: set[str] = set()
    spaces = sorted({ks for ks, _ in todo})
    for ks_name, key in todo:
        involved.update(ring.preference_list(key_token(ks_name, key), keyspaces[ks_name].n))
    which: list[str | None] = [None] if len(spaces) == len(keyspaces) else list(spaces)
    keys = 0
    for name in cluster.members:
        if name not in involved or not cluster.is_alive(name):
            continue
        for keyspace in which:
            request = RepairRequest(cluster.new_rid(), keyspace)
            result: Result = cluster.call(name, request, timeout=REPAIR_TIMEOUT)
            if isinstance(result, RepairResult):
                keys += result.keys
            else:
                problems.append(
                    Violation("repair_failed", keyspace or "*", "*", f"repair on {name}: {result}")
                )
    return keys


def _copies(cluster: SimCluster, ring: Ring, ks: KeyspaceDef, key: str) -> dict[str, Record | None]:
    home = ring.preference_list(key_token(ks.name, key), ks.n)
    return {node: cluster.hosts[node].store.get(ks.name, key) for node in home}


def _agree(records: Iterable[Record | None]) -> bool:
    records = list(records)
    return all(same_record(records[0], other) for other in records[1:])
