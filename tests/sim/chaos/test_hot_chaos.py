"""`chaos --hot`: a skewed workload on the simulator puts the hot key at the top of the `hot` view,
with its replicas; virtual nodes do not spread it, so those replicas carry its share each."""

from __future__ import annotations

from bhandar_cli.sim.chaos.chaos_options import ChaosOptions
from bhandar_cli.sim.chaos.chaos_run import run_chaos
from bhandar_cli.sim.chaos.report import render_summary, report_json, reproduce_command
from bhandar_cli.sim.chaos.workload import HOT_KEY, SIBS


def test_the_hot_key_of_a_skewed_run_tops_the_view_with_its_replicas() -> None:
    options = ChaosOptions(seed=5, ops=1500, nodes=6, replicas=3, faults=(), hot=0.5)
    report = run_chaos(options)
    assert report.ok, report.check.violations
    hot = report.hot
    assert hot is not None
    top = hot["keys"][0]
    assert (top["keyspace"], top["key"]) == (SIBS, HOT_KEY)
    assert 0.4 < top["share"] < 0.6
    assert all(other["share"] < top["share"] / 2 for other in hot["keys"][1:])
    assert len(top["replicas"]) == 3 == len(set(top["replicas"]))
    # Each of its replicas carries at least its share; every other node carries less.
    load = hot["replica_load"]
    assert all(load[r] >= top["share"] for r in top["replicas"])
    assert min(load[r] for r in top["replicas"]) > max(v for n, v in load.items() if n not in top["replicas"])
    assert "hot keys         sibs/hot:" in render_summary(report)
    assert report_json(report)["hot"] == hot
    assert reproduce_command(options).endswith("--hot 0.5")


def test_without_hot_the_report_has_no_hot_keys() -> None:
    report = run_chaos(ChaosOptions(seed=5, ops=200, faults=()))
    assert report.hot is None and "hot keys" not in render_summary(report)
    assert "hot" not in report_json(report)
