"""Every node's `GET /metrics` as Prometheus sees it: `promtool check metrics` finds nothing to say
about any scrape, every SLI is there in its type, and reads at ONE have a latency (they once all
recorded 0 ms: answered from the node's own copy in the step that received them). The shipped
rules file passes `promtool check rules`.

promtool comes from Debian's `prometheus` package (`.ci/run` installs it): without it these tests
fail, saying so, rather than skip."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import trio
from prometheus_client.parser import text_string_to_metric_families

from bhandar_cli.core.membership.ring import Ring, key_token
from bhandar_cli.core.model.metrics import CALLER_FAULTS
from bhandar_cli.fleet.cluster_file import ClusterFile
from bhandar_cli.repl.batch import open_tcp_session
from tests.e2e.conftest import REPO, http_client

RULES = REPO / "ops" / "prometheus" / "bhandar-rules.yml"
RULES_TESTS = REPO / "ops" / "prometheus" / "bhandar-rules.test.yml"  # promtool's unit tests of RULES

# Every SLI and its Prometheus type (a counter's family is named without `_total`).
SLIS = {
    "bhandar_requests": "counter",  # by op, consistency level and outcome
    "bhandar_request_latency_seconds": "histogram",
    "bhandar_stale_reads": "counter",
    "bhandar_hints_pending": "gauge",
    "bhandar_hints_oldest_age_seconds": "gauge",
    "bhandar_repair_oldest_age_seconds": "gauge",
    "bhandar_repair_ranges": "gauge",
    "bhandar_repair_ranges_never_repaired": "gauge",
    "bhandar_compaction_backlog": "gauge",
    "bhandar_disk_bytes": "gauge",
    "bhandar_wal_bytes": "gauge",
    "bhandar_memtable_bytes": "gauge",
    "bhandar_sstables": "gauge",
    "bhandar_node_requests": "counter",
    "bhandar_coordinated": "counter",
    "bhandar_replica_requests": "counter",
}
ONE_READS = 20


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, (
        "promtool is not installed: it comes with Debian's prometheus package "
        "(apt-get install prometheus; .ci/run installs it when missing)"
    )
    return path


def test_every_scrape_passes_promtool_and_holds_every_sli(shared_cluster: ClusterFile) -> None:
    tool = promtool()
    entry = shared_cluster.names[0]
    # Keys the entry node replicates: it answers their reads at ONE from its own copy, in the step
    # that received them (the reads whose latency was 0).
    ring = Ring.build(shared_cluster.names, shared_cluster.vnodes, shared_cluster.zones)
    keys = [
        k for k in (f"prom:{i}" for i in range(1000)) if entry in ring.preference_list(key_token("web", k), 3)
    ]
    with http_client(shared_cluster, entry) as http:
        for i, key in enumerate(keys[:ONE_READS]):
            put = http.put(f"/v1/kv/web/{key}", params={"consistency": "ONE"}, json={"value": i})
            assert put.status_code == 204, put.text
            got = http.get(f"/v1/kv/web/{key}", params={"consistency": "ONE"})
            assert got.status_code == 200, got.text
        assert http.put("/v1/kv/nosuchkeyspace/k", json={"value": 1}).status_code == 404
    for name in shared_cluster.names:
        with http_client(shared_cluster, name) as http:
            response = http.get("/metrics")
        assert response.status_code == 200, response.text
        checked = subprocess.run(
            [tool, "check", "metrics"], input=response.text, capture_output=True, text=True, timeout=60
        )
        assert checked.returncode == 0 and not checked.stdout.strip() and not checked.stderr.strip(), (
            name,
            checked.stdout,
            checked.stderr,
        )
        families = {f.name: f for f in text_string_to_metric_families(response.text)}
        for sli, kind in SLIS.items():
            assert sli in families and families[sli].type == kind, (name, sli, families.get(sli))
        assert _value(families, "bhandar_repair_ranges") > 0, name
        assert _value(families, "bhandar_disk_bytes") > 0, name
        if name == entry:
            _check_entry_node(families)


def _check_entry_node(families: dict[str, Any]) -> None:
    """The node the requests were sent to counted them, by outcome, with their latency."""
    outcomes = {
        (s.labels["op"], s.labels["consistency"], s.labels["outcome"]): s.value
        for s in families["bhandar_requests"].samples
    }
    assert outcomes[("get", "ONE", "ok")] >= ONE_READS and outcomes[("put", "ONE", "ok")] >= ONE_READS
    assert outcomes[("put", "QUORUM", "unknown_keyspace")] >= 1
    latency = {
        (s.name, s.labels.get("op"), s.labels.get("consistency")): s.value
        for s in families["bhandar_request_latency_seconds"].samples
        if "le" not in s.labels
    }
    for op in ("get", "put"):
        assert latency[("bhandar_request_latency_seconds_count", op, "ONE")] >= ONE_READS, latency
        assert latency[("bhandar_request_latency_seconds_sum", op, "ONE")] > 0, latency


def _value(families: dict[str, Any], name: str) -> float:
    (sample,) = families[name].samples
    return float(sample.value)


def test_the_repl_shows_the_latency_of_reads_at_one(shared_cluster: ClusterFile) -> None:
    async def main() -> dict[str, Any]:
        async with open_tcp_session(shared_cluster.dir, "json") as session:
            await session.run_line("put web prom:repl 1 c=ONE")
            for _ in range(10):
                await session.run_line("get web prom:repl c=ONE")
            (reply,) = await session.run_line("metrics")
            data: dict[str, Any] = reply.to_json()
            return data

    metrics = trio.run(main)
    one = metrics["ops"]["get"]["ONE"]
    assert one["ok"] >= 10 and one["p50_ms"] > 0 and one["p99_ms"] > 0, one


def test_the_shipped_rules_pass_promtool() -> None:
    tool = promtool()
    checked = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout, checked.stdout
    # Their values on made-up series: error ratio, budget left, burn rate, and when each alert fires.
    tested = subprocess.run(
        [tool, "test", "rules", RULES_TESTS.name],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=RULES_TESTS.parent,
    )
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
    # The SLO's "total" leaves out exactly the outcomes that are the client's fault.
    text = RULES.read_text()
    assert f'outcome!~"{"|".join(sorted(CALLER_FAULTS))}"' in text
