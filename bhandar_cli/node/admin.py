"""Read-only views of one node for tools (status, clock, hints, metrics), as plain data.

The in-process client calls these directly; a node process serves the same dictionaries through
its admin RPC, so the REPL renders one shape whichever way the cluster runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from bhandar_cli.core.metrics import Histogram, NodeMetrics, OpStats
from bhandar_cli.core.record_digest import digest
from bhandar_cli.core.records import from_plain, to_plain
from bhandar_cli.core.replica import Node
from bhandar_cli.core.ring import Ring, key_token


def node_info(
    name: str, zone: str, node: Node | None, now: float, tokens: int, counts: bool = True
) -> dict[str, Any]:
    """A node's status. `counts=False` skips the key count, a scan of the whole store: views that
    only want keyspaces, liveness or disk figures (the REPL's toolbar, several times a second)."""
    info: dict[str, Any] = {
        "id": name,
        "zone": zone,
        "up": node is not None,
        "status": "normal",
        "tokens": tokens,
    }
    if node is None:
        return info
    gossip = node.gossip
    peers = gossip.membership.peers() if gossip is not None else [p for p in node.ring.nodes if p != name]
    info.update(
        hints=node.hints.pending(),
        peers={p: node.is_up(p, now) for p in peers},
        keyspaces=[asdict(ks) for ks in node.keyspaces.values()],
        streams=node.stream_view(),
        repair=_repair_summary(node.repair_ages(now)),
        storage=node_storage(node),
    )
    if counts:
        info["keys"] = node.store.count()
    if gossip is not None:
        info["status"] = gossip.membership.mine.status
        info["tokens"] = len(gossip.membership.mine.tokens)
    return info


def node_storage(node: Node) -> dict[str, Any]:
    """Disk figures of an LSM-backed node ({} for the in-memory store)."""
    stats = getattr(node.store, "stats", None)
    if stats is None:
        return {}
    s = stats()
    return {
        "disk_bytes": s.disk_bytes,
        "sstables": s.sstables,
        "compaction_backlog": s.compaction_backlog,
        "wal_bytes": s.wal_bytes,
        "memtable_bytes": s.memtable_bytes,
    }


def node_members(node: Node, now: float) -> list[dict[str, Any]]:
    if node.gossip is None:
        return [{"id": p, "up": node.is_up(p, now), "status": "normal"} for p in node.ring.nodes]
    return node.gossip.view(now)


def node_tree_entries(node: Node, keyspace: str, lo: int, hi: int) -> list[list[Any]]:
    """(token, key, digest) of one range, for a Merkle comparison drawn by the client."""
    tree, _ = node.build_tree(keyspace, lo, hi, 0)
    return [[t, k, d] for t, k, d in tree.entries()]


def node_records(node: Node, keyspace: str, key: str) -> dict[str, Any]:
    own = node.local_record(keyspace, key)
    hinted = node.hinted_record(keyspace, key)
    return {
        "own": None if own is None else to_plain(own),
        "hinted": None if hinted is None else to_plain(hinted),
    }


def node_hints(node: Node, now: float) -> list[dict[str, Any]]:
    return [
        {"holder": node.id, "target": s.target, "count": s.count, "oldest_s": round(s.oldest_s, 3)}
        for s in node.hints.summary(now)
    ]


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


def records_from_plain(plain: dict[str, Any]) -> tuple[Any, Any]:
    own, hinted = plain["own"], plain["hinted"]
    return (None if own is None else from_plain(own), None if hinted is None else from_plain(hinted))


def _repair_summary(ages: dict[str, float | None]) -> dict[str, Any]:
    """Per-range repair ages, summed up: how many ranges, how many never repaired, the oldest."""
    known = [a for a in ages.values() if a is not None]
    return {
        "ranges": len(ages),
        "never": len(ages) - len(known),
        "oldest_s": max(known) if known else None,
        "ages": ages,
    }


def node_digests(node: Node) -> list[list[Any]]:
    """Every record the node holds as [keyspace, key, digest]: enough to compare replicas."""
    store = node.store
    return [[ks, key, digest(rec)] for ks in store.keyspaces() for key, rec in store.items(ks)]


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
