"""`bhandar bench`: the report's fields on both kinds of cluster, with the echo baseline beside it.

Only the shape and sanity of the figures are checked: benchmarks are commands, not timed tests.
"""

from __future__ import annotations

import json

import pytest

from bhandar_cli.cli.bench_cmd import parse_mix
from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import run_cli

FIELDS = ("ops_per_s", "p50_ms", "p99_ms", "max_ms", "baseline_ops_per_s", "ratio")


def check_report(report: dict[str, object], ops: int) -> None:
    assert report["cmd"] == "bench" and report["ok"] is True and report["errors"] == 0
    assert report["ops"] == ops
    for name in FIELDS:
        assert isinstance(report[name], float) and report[name] > 0, name  # type: ignore[operator]
    assert report["p50_ms"] <= report["p99_ms"] <= report["max_ms"]  # type: ignore[operator]


def test_bench_in_process_cluster() -> None:
    proc = run_cli("bench", "--nodes", "3", "--ops", "300", "--concurrency", "4", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    check_report(report, 300)
    assert report["target"] == "in-process" and set(report["per_op"]) == {"get", "put"}
    # In-process nodes exchange messages in memory: their baseline does too, not a TCP echo.
    assert report["baseline_tls"] is False and report["baseline"].startswith("bare in-process echo")


def test_bench_process_cluster_and_table(shared_cluster: ClusterFile) -> None:
    args = ("bench", "--cluster", shared_cluster.dir, "--ops", "400", "--mix", "3:1")
    report = json.loads(run_cli(*args, "-o", "json").stdout)
    check_report(report, 400)
    assert report["target"] == "processes" and report["nodes"] == 5 and report["consistency"] == "QUORUM"
    assert report["per_op"]["get"]["count"] > report["per_op"]["put"]["count"]
    # The echo speaks what the cluster speaks, so the ratio compares the same transport.
    assert shared_cluster.tls and report["baseline_tls"] is True
    assert report["baseline"].startswith("bare trio CBOR echo on 127.0.0.1")
    table = run_cli(*args[:-2], "--mix", "put", "-c", "ONE")
    assert table.returncode == 0, table.stderr
    assert b"echo" in table.stdout and b"ratio" in table.stdout and b"put" in table.stdout


@pytest.mark.parametrize(
    "args", [("--mix", "x"), ("--nodes", "0"), ("-c", "TWO"), ("--nodes", "3", "--cluster", ".")]
)
def test_bench_usage_errors(args: tuple[str, ...]) -> None:
    assert run_cli("bench", *args).returncode == 2


def test_parse_mix() -> None:
    assert parse_mix("get:put") == (1, 1)
    assert parse_mix("9:1") == (9, 1)
    assert parse_mix("get") == (1, 0)


def test_bench_security_measures_both_sides_in_one_run() -> None:
    proc = run_cli("bench", "security", "--nodes", "1", "--ops", "100", "--rounds", "2", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["cmd"] == "bench security" and report["ok"] is True and report["errors"] == 0
    assert report["secure"]["tls"] is True and report["plain"]["tls"] is False
    for side in ("secure", "plain"):
        assert len(report[side]["rounds_ops_per_s"]) == 2
        assert report[side]["ops_per_s"] == max(report[side]["rounds_ops_per_s"]) > 0
    assert report["ratio"] == round(report["secure"]["ops_per_s"] / report["plain"]["ops_per_s"], 3)


@pytest.mark.parametrize("args", [("--nodes", "0"), ("--rounds", "0"), ("-c", "TWO"), ("--mix", "1:x")])
def test_bench_security_usage_errors(args: tuple[str, ...]) -> None:
    assert run_cli("bench", "security", *args).returncode == 2


def test_a_second_run_on_the_same_cluster_writes_fresh_keys() -> None:
    """Puts of a run go to keys no earlier run wrote: a blind put to one would add a sibling, and
    each run on the same cluster would measure heavier keys than the one before."""
    import trio

    from bhandar_cli.bench.throughput import KEYSPACE, store_load
    from bhandar_cli.client.backends.in_process_backend import InProcessBackend
    from bhandar_cli.client.client import Client
    from bhandar_cli.fleet.in_process_cluster import InProcessCluster
    from bhandar_cli.host.network import LatencyModel

    async def main() -> None:
        cluster = InProcessCluster(3, 3, latency=LatencyModel(base_ms=0, mean_ms=0, spike_rate=0))
        async with trio.open_nursery() as nursery:
            await nursery.start(cluster.run)
            client = Client(InProcessBackend(cluster), "QUORUM")
            seen: list[set[str]] = []
            for _ in range(2):
                await store_load(client, 60, 4, (1, 1), b"v", "text/plain", None)
                seen.append(set(client.data.keys_seen[KEYSPACE]) - set().union(*seen))
            assert len(seen[1]) > 60  # the second run's preload and puts, all new keys
            for key in sorted(client.data.keys_seen[KEYSPACE]):
                assert len((await client.data.get(KEYSPACE, key)).values) == 1, key
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_bench_hot_skews_one_key_and_reports_it_with_its_replicas() -> None:
    args = ("bench", "--nodes", "5", "--ops", "400", "--concurrency", "4", "--hot", "0.5")
    report = json.loads(run_cli(*args, "-o", "json").stdout)
    check_report(report, 400)
    assert report["hot_fraction"] == 0.5
    top = report["hot"]["keys"][0]
    assert 0.35 < top["share"] < 0.65 and len(top["replicas"]) == 3
    assert all(report["hot"]["replica_load"][r] >= top["share"] for r in top["replicas"])
    table = run_cli(*args)
    assert table.returncode == 0 and b"hot keys (50% of operations read one key)" in table.stdout
    assert run_cli("bench", "--nodes", "3", "--hot", "1.5").returncode == 2
