"""The node's metrics for Prometheus: a collector that reads the node's counters when scraped
(`GET /metrics` of the HTTP API, node/http/api.py), so nothing is kept twice.

Every figure comes from what the node already keeps for its own views: the counters and latency
histograms of core/model/metrics.py (`NodeMetrics`), and the status of `info()` (core/node_views.py: hints,
repair ages, storage), the same numbers the REPL's `metrics` command sums over the cluster.
Counters are monotonic over the node process's life; gauges are read at the scrape. The recording
and alert rules built on them ship in ops/prometheus/bhandar-rules.yml.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from bhandar_cli.core.model.metrics import NodeMetrics, bucket_edge
from bhandar_cli.core.node_views import NodeInfo

# Latency bucket bounds (`le`, seconds): Prometheus' usual 1-2.5-5 steps from 0.5 ms to 10 s, each
# moved to the nearest edge of the node's own 2%-wide buckets so every count is exact (the `le`
# labels therefore read 0.0009998..., not 0.001).
LATENCY_BOUNDS_MS = [
    bucket_edge(ms) for ms in (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
]

# NodeMetrics counters exported as they are: attribute -> (metric name without `_total`, help).
COUNTERS: dict[str, tuple[str, str]] = {
    "read_repairs": ("bhandar_read_repairs", "Replicas repaired after reads."),
    "stale_reads": ("bhandar_stale_reads", "Reads that found a stale replica (the stale-read SLI)."),
    "hints_stored": ("bhandar_hints_stored", "Hints stored for down replicas."),
    "hints_delivered": ("bhandar_hints_delivered", "Hints handed off to their owners."),
    "hints_expired": ("bhandar_hints_expired", "Hints dropped for age."),
    "hints_refused": ("bhandar_hints_refused", "Hints refused because a queue was full."),
    "coordinated": ("bhandar_coordinated", "Client requests this node coordinated."),
    "forwarded": ("bhandar_forwarded", "Requests forwarded to a replica."),
    "forward_fallbacks": (
        "bhandar_forward_fallbacks",
        "Forwarded puts handed to another coordinator after a timeout.",
    ),
    "exact_dots_voided": (
        "bhandar_exact_dots_voided",
        "Forwarded puts no coordinator took, stored as a void under their exact dot.",
    ),
    "exact_dots_left_as_hints": (
        "bhandar_exact_dots_left_as_hints",
        "Forwarded puts whose coordinators went silent, left as a hint under their exact dot.",
    ),
    "sibling_limit_exceeded": (
        "bhandar_sibling_limit_exceeded",
        "Keys a merge took over the sibling limit (every sibling kept).",
    ),
    "replica_requests": ("bhandar_replica_requests", "Reads and writes served as a replica."),
    "repair_sessions": ("bhandar_repair_sessions", "Anti-entropy range comparisons started."),
    "keys_repaired": ("bhandar_keys_repaired", "Keys anti-entropy sent to a replica that lacked them."),
    "tombstones_reaped": ("bhandar_tombstones_reaped", "Tombstones removed once every replica had them."),
    "values_expired": ("bhandar_values_expired", "Values of ttl keyspaces turned into tombstones by expiry."),
}

# info()["storage"] figures of an LSM-backed node (none for the in-memory store): key -> (name, help).
STORAGE: dict[str, tuple[str, str]] = {
    "disk_bytes": ("bhandar_disk_bytes", "Bytes of the node's store on disk (SSTables and WAL)."),
    "wal_bytes": ("bhandar_wal_bytes", "Bytes of the write-ahead log."),
    "memtable_bytes": ("bhandar_memtable_bytes", "Bytes of the live memtable."),
    "sstables": ("bhandar_sstables", "SSTables on disk."),
    "compaction_backlog": (
        "bhandar_compaction_backlog",
        "SSTables waiting in tiers due for compaction (the compaction backlog).",
    ),
}


class MetricsSource(Protocol):
    """What the collector reads from its node (NodeProcess)."""

    def info(self) -> NodeInfo: ...
    def current_metrics(self) -> NodeMetrics | None: ...


class NodeCollector:
    """Prometheus metrics read from the node at scrape time (nothing is kept twice)."""

    def __init__(self, node: MetricsSource) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        metrics = self.node.current_metrics() or NodeMetrics()
        info = self.node.info()
        yield from _requests(metrics)
        for attr, (name, text) in COUNTERS.items():
            yield CounterMetricFamily(name, text, value=getattr(metrics, attr))
        yield CounterMetricFamily(
            "bhandar_node_requests",
            "Requests this node served: client requests it coordinated, reads and writes as a "
            "replica (the load per node).",
            value=metrics.requests,
        )
        yield _labelled(
            "bhandar_corruptions", "Storage corruption found on its disk.", "kind", metrics.corruptions
        )
        yield _labelled(
            "bhandar_peer_rejections",
            "Peer connections and messages refused.",
            "reason",
            info.get("peer_rejections", {}),
        )
        transport = info.get("transport", {})
        events = {event: transport.get(event, 0) for event in ("sent", "received", "dropped")}
        yield _labelled("bhandar_messages", "Peer messages.", "event", events)
        yield from _hints_and_repair(info)
        storage = info.get("storage") or {}
        for key, (name, text) in STORAGE.items():
            gauge = GaugeMetricFamily(name, text)
            if key in storage:
                gauge.add_metric([], storage[key])
            yield gauge
        yield GaugeMetricFamily("bhandar_keys", "Keys stored on this node.", value=info.get("keys", 0))
        yield GaugeMetricFamily(
            "bhandar_members", "Members this node knows.", value=len(info.get("members", []))
        )
        peers = info.get("peers", {})
        yield GaugeMetricFamily("bhandar_peers_up", "Peers this node believes up.", value=sum(peers.values()))


def _requests(metrics: NodeMetrics) -> Iterator[Metric]:
    """Client requests by outcome, and the latency of those that succeeded."""
    labels = ["op", "consistency"]
    requests = CounterMetricFamily(
        "bhandar_requests",
        "Client data requests answered by this node (the node the client sent them to), by outcome: "
        "ok, or the error code (bad_input, too_large and unknown_keyspace are the client's fault).",
        labels=[*labels, "outcome"],
    )
    latency = HistogramMetricFamily(
        "bhandar_request_latency_seconds",
        "Latency of successful client requests, from their arrival at this node to their answer.",
        labels=labels,
    )
    for (op, level), stats in sorted(metrics.ops.items()):
        for outcome, n in sorted(stats.outcomes().items()):
            requests.add_metric([op, level, outcome], n)
        counts = stats.latency.cumulative(LATENCY_BOUNDS_MS)
        buckets = [(repr(ms / 1000.0), n) for ms, n in zip(LATENCY_BOUNDS_MS, counts, strict=True)]
        latency.add_metric(
            [op, level], [*buckets, ("+Inf", stats.latency.count)], stats.latency.total_ms / 1000.0
        )
    yield requests
    yield latency


def _hints_and_repair(info: NodeInfo) -> Iterator[Metric]:
    """Hints waiting and their age; anti-entropy's ranges and repair ages (core/node_views.py)."""
    yield GaugeMetricFamily(
        "bhandar_hints_pending", "Hints waiting for delivery.", value=info.get("hints", 0)
    )
    yield GaugeMetricFamily(
        "bhandar_hints_oldest_age_seconds",
        "Seconds the oldest hint this node holds has waited for delivery (0: none waits).",
        value=info.get("hints_oldest_s", 0.0),
    )
    repair = info.get("repair")
    yield GaugeMetricFamily(
        "bhandar_repair_ranges",
        "Ranges this node replicates (compared by anti-entropy).",
        value=0 if repair is None else repair["ranges"],
    )
    yield GaugeMetricFamily(
        "bhandar_repair_ranges_never_repaired",
        "Ranges anti-entropy has not compared yet since this node started.",
        value=0 if repair is None else repair["never"],
    )
    oldest = GaugeMetricFamily(
        "bhandar_repair_oldest_age_seconds",
        "Seconds since the least recently repaired range was last compared by anti-entropy "
        "(absent until one range has been).",
    )
    if repair is not None and repair["oldest_s"] is not None:
        oldest.add_metric([], repair["oldest_s"])
    yield oldest


def _labelled(name: str, text: str, label: str, values: dict[str, int]) -> Metric:
    """A counter with one sample per `values` key, labelled `label`."""
    metric = CounterMetricFamily(name, text, labels=[label])
    for key, n in sorted(values.items()):
        metric.add_metric([key], n)
    return metric
