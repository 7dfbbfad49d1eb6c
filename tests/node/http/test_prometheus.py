"""The node's /metrics text as Prometheus reads it: latency is a real histogram (`_bucket`, `_sum`,
`_count` per operation and level), parsed here with the Prometheus client's own parser."""

from __future__ import annotations

import random
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bhandar_cli.core.model.metrics import NodeMetrics
from bhandar_cli.core.node_views import NodeInfo
from bhandar_cli.node.http.prometheus import LATENCY_BOUNDS_MS, NodeCollector


class _Source:
    def __init__(self, metrics: NodeMetrics) -> None:
        self.metrics = metrics

    def info(self) -> NodeInfo:
        return {
            "members": ["A", "B"],
            "peers": {"B": True},
            "hints": 3,
            "hints_oldest_s": 42.5,
            "keys": 3,
            "repair": {"ranges": 4, "never": 1, "oldest_s": 9.25, "ages": {}},
            "storage": {
                "disk_bytes": 4096,
                "sstables": 6,
                "compaction_backlog": 4,
                "wal_bytes": 100,
                "memtable_bytes": 50,
            },
        }

    def current_metrics(self) -> NodeMetrics | None:
        return self.metrics


def _scrape(metrics: NodeMetrics) -> dict[str, Any]:
    registry = CollectorRegistry()
    registry.register(NodeCollector(_Source(metrics)))
    text = generate_latest(registry).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_latency_is_a_histogram_whose_buckets_count_exactly() -> None:
    rng = random.Random(5)
    metrics = NodeMetrics()
    latencies = {
        ("get", "ONE"): [rng.lognormvariate(0.5, 1.2) for _ in range(500)],
        ("put", "QUORUM"): [rng.lognormvariate(1.5, 0.8) for _ in range(300)],
    }
    for (op, level), values in latencies.items():
        for ms in values:
            metrics.observe(op, level, "ok", ms)
    metrics.observe("put", "QUORUM", "timeout", 1000.0)  # a failure: counted as a request, not a latency
    metrics.observe("put", "QUORUM", "bad_input", 0.0)
    families = _scrape(metrics)
    latency = families["bhandar_request_latency_seconds"]
    assert latency.type == "histogram"
    for (op, level), values in latencies.items():
        samples = [
            s for s in latency.samples if s.labels.get("op") == op and s.labels.get("consistency") == level
        ]
        buckets = [s for s in samples if s.name.endswith("_bucket")]
        assert [float(s.labels["le"]) for s in buckets[:-1]] == [ms / 1000 for ms in LATENCY_BOUNDS_MS]
        assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == len(values)
        for sample, bound_ms in zip(buckets, LATENCY_BOUNDS_MS, strict=False):
            assert sample.value == sum(1 for ms in values if ms <= bound_ms), sample
        (count,) = [s.value for s in samples if s.name.endswith("_count")]
        (total,) = [s.value for s in samples if s.name.endswith("_sum")]
        assert count == len(values) and abs(total - sum(values) / 1000) < 1e-9
    requests = {(s.labels["op"], s.labels["outcome"]): s.value for s in families["bhandar_requests"].samples}
    assert requests[("put", "timeout")] == 1 and requests[("put", "ok")] == 300
    assert requests[("put", "bad_input")] == 1 and requests[("get", "ok")] == 500
    assert families["bhandar_requests"].type == "counter"


def test_every_sli_of_the_node_views_is_exported_in_its_type() -> None:
    metrics = NodeMetrics(stale_reads=2, coordinated=5, replica_requests=7)
    families = _scrape(metrics)
    assert families["bhandar_node_requests"].samples[0].value == 12
    assert families["bhandar_stale_reads"].samples[0].value == 2
    assert families["bhandar_hints_oldest_age_seconds"].samples[0].value == 42.5
    assert families["bhandar_repair_oldest_age_seconds"].samples[0].value == 9.25
    assert families["bhandar_repair_ranges_never_repaired"].samples[0].value == 1
    assert families["bhandar_compaction_backlog"].samples[0].value == 4
    assert families["bhandar_disk_bytes"].samples[0].value == 4096
    for name in ("bhandar_hints_oldest_age_seconds", "bhandar_disk_bytes", "bhandar_compaction_backlog"):
        assert families[name].type == "gauge", name
    assert families["bhandar_node_requests"].type == "counter"
