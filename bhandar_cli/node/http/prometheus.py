"""The node's metrics for Prometheus: a collector that reads the node's counters when scraped
(`GET /metrics` of the HTTP API, node/http/api.py), so nothing is kept twice.

Every figure comes from what the node already keeps for its own views: the counters and latency
histograms of core/model/metrics.py (`NodeMetrics`), and the status of `info()` (core/node_views.py: hints,
repair ages, storage), the same numbers the REPL's `metrics` command sums over the cluster. Which
series there are, their names and help, is the metrics table (`METRICS`, core/model/metrics.py);
`docs_table` writes the docs' table of them.
Counters are monotonic over the node process's life; gauges are read at the scrape. The recording
and alert rules built on them ship in ops/prometheus/bhandar-rules.yml.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from bhandar_cli.core.model import (
    METRICS,
    REQUEST_LATENCY,
    REQUESTS,
    MetricKind,
    NodeMetrics,
    bucket_edge,
    metrics_table,
)
from bhandar_cli.core.model import Metric as MetricRow

if TYPE_CHECKING:
    from bhandar_cli.core import NodeInfo

# Latency bucket bounds (`le`, seconds): Prometheus' usual 1-2.5-5 steps from 0.5 ms to 10 s, each
# moved to the nearest edge of the node's own 2%-wide buckets so every count is exact (the `le`
# labels therefore read 0.0009998..., not 0.001).
LATENCY_BOUNDS_MS = [
    bucket_edge(ms) for ms in (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
]


class MetricsSource(Protocol):
    """What the collector reads from its node (NodeProcess)."""

    def info(self) -> NodeInfo: ...
    def current_metrics(self) -> NodeMetrics | None: ...


class NodeCollector:
    """Prometheus metrics read from the node at scrape time (nothing is kept twice): one family
    per row of the metrics table."""

    def __init__(self, node: MetricsSource) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        metrics = self.node.current_metrics() or NodeMetrics()
        info = self.node.info()
        yield from _requests(metrics)
        for row in metrics_table(type(metrics)):
            if row.read is not None:
                yield _family(row, row.read(metrics, info))


def _family(row: MetricRow, value: Any) -> Metric:
    """The row's family: one sample, or one per label value (a counter by label); a gauge whose
    value is None (a figure this node lacks) has no sample."""
    if row.labels:
        (label,) = row.labels
        labelled = CounterMetricFamily(row.series, row.help, labels=[label])
        for key, n in sorted(value.items()):
            labelled.add_metric([key], n)
        return labelled
    if row.kind is MetricKind.COUNTER:
        return CounterMetricFamily(row.series, row.help, value=value)
    gauge = GaugeMetricFamily(row.series, row.help)
    if value is not None:
        gauge.add_metric([], value)
    return gauge


def _requests(metrics: NodeMetrics) -> Iterator[Metric]:
    """Client requests by outcome, and the latency of those that succeeded."""
    requests = CounterMetricFamily(REQUESTS.series, REQUESTS.help, labels=list(REQUESTS.labels))
    latency = HistogramMetricFamily(
        REQUEST_LATENCY.series, REQUEST_LATENCY.help, labels=list(REQUEST_LATENCY.labels)
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


def docs_table(table: tuple[MetricRow, ...] = METRICS) -> str:
    """The table of docs/operations-and-metrics.md ("The Prometheus series"), one line per row."""
    lines = [
        "| series | type | unit | in `metrics` (across nodes) | `show=` | what |",
        "|---|---|---|---|---|---|",
    ]
    for row in table:
        labels = "{" + ",".join(row.labels) + "}" if row.labels else ""
        suffix = "_total" if row.kind is MetricKind.COUNTER else ""
        where = f"`{'.'.join(row.view)}` ({row.merge.value})" if row.view else "-"
        lines.append(
            f"| `{row.series}{suffix}{labels}` | {row.kind.value} | {row.unit} | {where} "
            f"| {row.part or '-'} | {row.help} |"
        )
    return "\n".join(lines) + "\n"
