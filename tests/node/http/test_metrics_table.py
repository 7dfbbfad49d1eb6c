"""The metrics table (`METRICS`, core/model/metrics.py) is the one place a metric is named: a
counter added there (here, a test-local field) is a NodeMetrics field, is merged, is exported to
Prometheus with its help, is placed in the `metrics` view and its `show=` part, and is a row of
the docs' table. The series Prometheus reads and the view's JSON keys are contracts: pinned here."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bhandar_cli.client.openers import ClusterOptions, open_in_process_client
from bhandar_cli.core.model.metrics import (
    METRICS,
    REPAIRS,
    NodeMetrics,
    counter,
    metrics_parts,
    metrics_table,
)
from bhandar_cli.core.node_views import NodeInfo
from bhandar_cli.node.http.prometheus import NodeCollector, docs_table
from bhandar_cli.repl.commands.observe import METRICS_PARTS

ROOT = Path(__file__).resolve().parents[3]


class _Source:
    def __init__(self, metrics: NodeMetrics) -> None:
        self.metrics = metrics

    def info(self) -> NodeInfo:
        return {"members": ["A"], "peers": {}, "hints": 0, "keys": 0, "storage": {"disk_bytes": 1}}

    def current_metrics(self) -> NodeMetrics | None:
        return self.metrics


def _families(metrics: NodeMetrics) -> dict[str, Any]:
    registry = CollectorRegistry()
    registry.register(NodeCollector(_Source(metrics)))
    text = generate_latest(registry).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


@dataclass
class _WithWidgets(NodeMetrics):
    widgets_frobbed: int = counter(
        "Widgets frobbed.", unit="widgets", part=REPAIRS, view=("anti_entropy", "widgets_frobbed")
    )


@pytest.mark.patches_compiled  # a compiled NodeMetrics cannot be subclassed by Python code
def test_a_counter_declared_once_is_a_field_merged_exported_viewed_in_its_part_and_documented() -> None:
    a, b = _WithWidgets(), _WithWidgets()
    a.widgets_frobbed += 2
    b.widgets_frobbed += 3
    b.stale_reads += 1
    a.merge(b)
    assert (a.widgets_frobbed, a.stale_reads) == (5, 1)
    family = _families(a)["bhandar_widgets_frobbed"]
    assert family.type == "counter" and family.documentation == "Widgets frobbed."
    assert family.samples[0].value == 5
    assert a.view()["anti_entropy"]["widgets_frobbed"] == 5
    table = metrics_table(_WithWidgets)
    assert [r.name for r in table if r.name not in {m.name for m in METRICS}] == ["widgets_frobbed"]
    assert "anti_entropy" in metrics_parts(table)[REPAIRS]
    (line,) = [row for row in docs_table(table).splitlines() if "widgets" in row]
    assert "`bhandar_widgets_frobbed_total`" in line and "Widgets frobbed." in line
    assert "`anti_entropy.widgets_frobbed` (summed)" in line and "| repairs |" in line
    assert "widgets" not in docs_table()  # test-local: the real table is untouched


# The series a Prometheus server scrapes (ops/prometheus/bhandar-rules.yml and dashboards use them).
SERIES = {
    "bhandar_requests": "counter",
    "bhandar_request_latency_seconds": "histogram",
    "bhandar_node_requests": "counter",
    **{
        f"bhandar_{name}": "counter"
        for name in [
            "read_repairs",
            "stale_reads",
            "hints_stored",
            "hints_delivered",
            "hints_expired",
            "hints_for_silent",
            "hints_refused",
            "coordinated",
            "replica_requests",
            "forwarded",
            "forward_fallbacks",
            "exact_dots_voided",
            "exact_dots_left_as_hints",
            "repair_sessions",
            "keys_repaired",
            "tombstones_reaped",
            "values_expired",
            "sibling_limit_exceeded",
            "corruptions",
            "peer_rejections",
            "messages",
        ]
    },
    **{
        f"bhandar_{name}": "gauge"
        for name in [
            "hints_pending",
            "hints_oldest_age_seconds",
            "repair_ranges",
            "repair_ranges_never_repaired",
            "repair_oldest_age_seconds",
            "disk_bytes",
            "wal_bytes",
            "memtable_bytes",
            "sstables",
            "compaction_backlog",
            "keys",
            "members",
            "peers_up",
        ]
    },
}


def test_the_series_prometheus_reads_keep_their_names_and_types() -> None:
    metrics = NodeMetrics()
    metrics.observe("get", "ONE", "ok", 1.0)
    families = _families(metrics)
    assert {name: f.type for name, f in families.items()} == SERIES


def test_the_metrics_view_keeps_its_json_shape_and_show_parts() -> None:
    async def main() -> None:
        async with open_in_process_client(ClusterOptions(nodes=2, zones=1, memory=True)) as client:
            await client.data.put("kv", "k", b'"v"', "application/json", "none")
            view = await client.views.metrics()
        assert set(view) == {
            "cmd", "ok", "ops", "stale_reads", "read_repairs", "hints", "requests", "forwarded",
            "forward_fallbacks", "sibling_limit_exceeded", "anti_entropy", "values_expired", "hot",
            "storage",
        }  # fmt: skip
        assert set(view["hints"]) == {
            "pending",
            "oldest_s",
            "stored",
            "delivered",
            "expired",
            "for_silent",
            "refused",
        }
        assert set(view["anti_entropy"]) == {
            "sessions",
            "keys_repaired",
            "tombstones_reaped",
            "repair_age",
            "ranges",
        }
        assert set(view["requests"]) == {"A", "B"} and view["ops"]["put"]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert {part: set(keys) for part, keys in METRICS_PARTS.items()} == {
        "ops": {"ops", "requests"},
        "repairs": {
            "read_repairs", "stale_reads", "hints", "forwarded", "forward_fallbacks", "anti_entropy",
            "sibling_limit_exceeded",
        },
        "storage": {"storage"},
    }  # fmt: skip


def test_the_docs_table_is_the_one_the_metrics_table_writes() -> None:
    spec = importlib.util.spec_from_file_location(
        "gen_metrics_table", ROOT / "scripts" / "gen_metrics_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_metrics_table"] = module
    spec.loader.exec_module(module)
    text = module.DOC.read_text()
    assert module.with_table(text, docs_table()) == text, "stale: run python scripts/gen_metrics_table.py"
    for row in METRICS:
        assert f"`{row.series}" in text, row.name
