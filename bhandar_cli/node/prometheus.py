"""The node's metrics for Prometheus: a collector that reads the node's counters when scraped
(`GET /metrics` of the HTTP API, node/http.py), so nothing is kept twice."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from bhandar_cli.core.metrics import NodeMetrics, bucket_edge

# Latency bucket bounds (`le`, seconds): Prometheus' usual 1-2.5-5 steps from 0.5 ms to 10 s, each
# moved to the nearest edge of the node's own 2%-wide buckets so every count is exact (the `le`
# labels therefore read 0.0009998..., not 0.001).
LATENCY_BOUNDS_MS = [
    bucket_edge(ms) for ms in (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
]


class MetricsSource(Protocol):
    """What the collector reads from its node (NodeProcess)."""

    def info(self) -> dict[str, Any]: ...
    def current_metrics(self) -> NodeMetrics | None: ...


class NodeCollector:
    """Prometheus metrics read from the node at scrape time (nothing is kept twice)."""

    def __init__(self, node: MetricsSource) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        metrics = self.node.current_metrics() or NodeMetrics()
        info = self.node.info()
        labels = ["op", "consistency"]
        requests = CounterMetricFamily(
            "bhandar_requests", "Client requests coordinated here.", labels=[*labels, "outcome"]
        )
        latency = HistogramMetricFamily(
            "bhandar_request_latency_seconds", "Latency of successful requests.", labels=labels
        )
        for (op, level), stats in sorted(metrics.ops.items()):
            requests.add_metric([op, level, "ok"], stats.ok)
            requests.add_metric([op, level, "failed"], stats.count - stats.ok)
            counts = stats.latency.cumulative(LATENCY_BOUNDS_MS)
            buckets = [(repr(ms / 1000.0), n) for ms, n in zip(LATENCY_BOUNDS_MS, counts, strict=True)]
            latency.add_metric(
                [op, level], [*buckets, ("+Inf", stats.latency.count)], stats.latency.total_ms / 1000.0
            )
        yield requests
        yield latency
        for name, text in (
            ("read_repairs", "Replicas repaired after reads."),
            ("stale_reads", "Reads that found a stale replica (the stale-read SLI)."),
            ("hints_stored", "Hints stored for down replicas."),
            ("hints_delivered", "Hints handed off to their owners."),
            ("hints_expired", "Hints dropped for age."),
            ("hints_refused", "Hints refused because a queue was full."),
            ("forwarded", "Requests forwarded to a replica."),
            ("forward_fallbacks", "Forwarded puts handed to another coordinator after a timeout."),
            ("sibling_limit_exceeded", "Keys a merge took over the sibling limit (every sibling kept)."),
            ("replica_requests", "Reads and writes served as a replica."),
        ):
            yield CounterMetricFamily(f"bhandar_{name}", text, value=getattr(metrics, name))
        corruptions = CounterMetricFamily(
            "bhandar_corruptions", "Storage corruption found on this node's disk.", labels=["kind"]
        )
        for kind, n in sorted(metrics.corruptions.items()):
            corruptions.add_metric([kind], n)
        yield corruptions
        rejections = CounterMetricFamily(
            "bhandar_peer_rejections", "Peer connections and messages refused.", labels=["reason"]
        )
        for reason, n in sorted(info.get("peer_rejections", {}).items()):
            rejections.add_metric([reason], n)
        yield rejections
        transport = CounterMetricFamily("bhandar_messages", "Peer messages.", labels=["event"])
        for event in ("sent", "received", "dropped"):
            transport.add_metric([event], info.get("transport", {}).get(event, 0))
        yield transport
        yield GaugeMetricFamily(
            "bhandar_hints_pending", "Hints waiting for delivery.", value=info.get("hints", 0)
        )
        yield GaugeMetricFamily("bhandar_keys", "Keys stored on this node.", value=info.get("keys", 0))
        yield GaugeMetricFamily(
            "bhandar_members", "Members this node knows.", value=len(info.get("members", []))
        )
        peers = info.get("peers", {})
        yield GaugeMetricFamily("bhandar_peers_up", "Peers this node believes up.", value=sum(peers.values()))
