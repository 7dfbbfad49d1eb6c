"""What drivers add to a node's views (core/views.py) for tools: the status of a node that may be
down, the plain forms of records and metrics for the admin RPC, and the cluster-wide convergence
check both backends run on their nodes' views.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bhandar_cli.core.metrics import Histogram, NodeMetrics, OpStats
from bhandar_cli.core.node import Node
from bhandar_cli.core.records import Record, from_plain, to_plain
from bhandar_cli.core.ring import Ring, key_token


def node_info(
    name: str, zone: str, node: Node | None, now: float, tokens: int, counts: bool = True
) -> dict[str, Any]:
    """A node's status; what the driver knows (its name, zone and boot tokens) when it is down."""
    info: dict[str, Any] = {
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
    plain = {k: v for k, v in vars(metrics).items() if k != "ops"}
    plain["ops"] = [
        [op, level, s.count, s.ok, dict(s.latency.buckets), s.latency.total_ms, s.latency.max_ms]
        for (op, level), s in metrics.ops.items()
    ]
    return plain


def metrics_from_plain(plain: dict[str, Any]) -> NodeMetrics:
    metrics = NodeMetrics(**{k: v for k, v in plain.items() if k != "ops"})
    for op, level, count, ok, buckets, total_ms, max_ms in plain["ops"]:
        hist = Histogram()
        hist.buckets.update({int(b): int(c) for b, c in buckets.items()})
        hist.count, hist.total_ms, hist.max_ms = sum(hist.buckets.values()), total_ms, max_ms
        metrics.ops[(op, level)] = OpStats(count, ok, hist)
    return metrics


def convergence_problems(
    ring: Ring,
    hints: Mapping[str, list[dict[str, Any]]],
    digests: Mapping[str, list[list[Any]]],
    replication: Mapping[str, int],
    default_n: int,
) -> list[str]:
    """Why a cluster is not converged, from its live nodes' hint queues and record digests:
    a hint held for a live node, or replicas of a key that differ. Empty when converged."""
    problems = [
        f"{name} holds {q['count']} hint(s) for {q['target']}"
        for name, queues in hints.items()
        for q in queues
        if q["target"] in digests
    ]
    held = {name: {(ks, key): d for ks, key, d in rows} for name, rows in digests.items()}
    for keyspace, key in sorted({k for rows in held.values() for k in rows}):
        replicas = ring.preference_list(key_token(keyspace, key), replication.get(keyspace, default_n))
        copies = [held[r].get((keyspace, key)) for r in replicas if r in held]
        if any(c != copies[0] for c in copies[1:]):
            problems.append(f"replicas of {keyspace}/{key} differ")
    return problems
