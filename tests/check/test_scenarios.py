"""Each workload's checklist names its scenarios in its own words, each one a known plan; only
dynamo-kv speaks of hint holders and replicas."""

from __future__ import annotations

from bhandar_cli.check.catalog import SCENARIOS, WORKLOADS, scenarios
from bhandar_cli.check.nemesis import scenario


def test_every_workload_has_scenarios_that_are_known_plans() -> None:
    nodes = ["n0", "n1", "n2"]
    for workload in WORKLOADS:
        own = scenarios(workload)
        assert own and next(iter(own)) == "no fault", workload
        for name, plan in own.items():
            assert plan in SCENARIOS, (workload, name)
            scenario(plan, nodes, 5.0)  # raises on an unknown plan


def test_only_dynamo_kv_speaks_of_hint_holders_and_replicas() -> None:
    assert list(scenarios("dynamo-kv")) == list(SCENARIOS)
    for workload in WORKLOADS:
        if workload != "dynamo-kv":
            words = " ".join(scenarios(workload))
            assert "hint" not in words and "replica" not in words, workload
    assert scenarios("broadcast")["node killed during a partition"] == "hint holder killed"
    assert list(scenarios("echo")) == ["no fault", "one node down", "slow node", "restarts"]
