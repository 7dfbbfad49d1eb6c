"""What drivers add to a node's views (core/node_views.py) for tools: the status of a node that may be
down, the plain forms of records and metrics for the admin RPC, and the cluster-wide convergence
check both backends run on their nodes' views.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bhandar_cli.core import HintQueueRow, Node, NodeInfo
from bhandar_cli.core.membership import Ring
from bhandar_cli.core.model import Histogram, NodeMetrics, OpStats, Record, from_plain, to_plain
from bhandar_cli.core.model import count as counted
from bhandar_cli.core.repair import EMPTY_HASH


def node_info(
    name: str, zone: str, node: Node | None, now: float, tokens: int, counts: bool = True
) -> NodeInfo:
    """A node's status; what the driver knows (its name, zone and boot tokens) when it is down."""
    info: NodeInfo = {
        "id": name,
        "zone": zone,
        "up": node is not None,
        "status": "normal",
        "tokens": tokens,
    }
    if node is not None:
        info.update(node.info(now, counts))
    return info


def records_to_plain(records: tuple[Record | None, Record | None]) -> dict[str, Any]:
    own, hinted = records
    return {
        "own": None if own is None else to_plain(own),
        "hinted": None if hinted is None else to_plain(hinted),
    }


def records_from_plain(plain: dict[str, Any]) -> tuple[Record | None, Record | None]:
    own, hinted = plain["own"], plain["hinted"]
    return (None if own is None else from_plain(own), None if hinted is None else from_plain(hinted))


def metrics_to_plain(metrics: NodeMetrics) -> dict[str, Any]:
    # By its fields, not vars(): compiled (bhandar_cli/native.py) it keeps them in no __dict__.
    plain = {f.name: getattr(metrics, f.name) for f in dataclasses.fields(metrics) if f.name != "ops"}
    plain["ops"] = [
        [op, level, s.count, s.ok, dict(s.latency.buckets), s.latency.total_ms, s.latency.max_ms, s.failures]
        for (op, level), s in metrics.ops.items()
    ]
    return plain


def metrics_from_plain(plain: dict[str, Any]) -> NodeMetrics:
    metrics = NodeMetrics(**{k: v for k, v in plain.items() if k != "ops"})
    for row in plain["ops"]:
        op, level, count, ok, buckets, total_ms, max_ms = row[:7]
        failures = row[7] if len(row) > 7 else {}  # (a node of an earlier version sends none)
        hist = Histogram()
        hist.buckets.update({int(b): int(c) for b, c in buckets.items()})
        hist.count, hist.total_ms, hist.max_ms = sum(hist.buckets.values()), total_ms, max_ms
        metrics.ops[(op, level)] = OpStats(count, ok, hist, {str(c): int(n) for c, n in failures.items()})
    return metrics


def convergence_ranges(ring: Ring) -> list[tuple[int, int]]:
    """The ranges (lo, hi] whose hashes the convergence check asks every live node for."""
    return [(r.lo, r.hi) for r in ring.ranges()]


def convergence_problems(
    ring: Ring,
    hints: Mapping[str, list[HintQueueRow]],
    range_hashes: Mapping[str, list[list[Any]]],
    replication: Mapping[str, int],
    default_n: int,
) -> list[str]:
    """Why a cluster is not converged, from its live nodes' hint queues and range hashes (the
    `range_hashes` view over `convergence_ranges(ring)`): a hint held for a live node, or
    replicas of a range that hold different records. Empty when converged."""
    problems = [
        f"{name} holds {counted(q['count'], 'hint')} for {q['target']}"
        for name, queues in hints.items()
        for q in queues
        if q["target"] in range_hashes
    ]
    held = {name: {(ks, lo, hi): h for ks, lo, hi, h in rows} for name, rows in range_hashes.items()}
    empty = EMPTY_HASH.hex()  # a node that does not know a keyspace holds none of its records
    for keyspace in sorted({k[0] for rows in held.values() for k in rows}):
        n = replication.get(keyspace, default_n)
        for r in ring.ranges():
            replicas = [name for name in ring.preference_list(r.hi, n) if name in held]
            if len({held[name].get((keyspace, r.lo, r.hi), empty) for name in replicas}) > 1:
                shown = ", ".join(replicas)
                problems.append(f"replicas of {keyspace} range ({r.lo}, {r.hi}] differ ({shown})")
    return problems
