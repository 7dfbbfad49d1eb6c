"""The simulator's stepper: a host steps when input arrives or its deadline passes, and a step
brought forward by a message does not leave a second event behind at the deadline it replaced."""

from __future__ import annotations

from collections import Counter

from bhandar_cli.core.config import KeyspaceDef
from bhandar_cli.core.messages import GetRequest, KeyspaceRequest, PutRequest, PutResult
from bhandar_cli.core.versions import JSON
from bhandar_cli.sim.cluster import SimCluster
from bhandar_cli.sim.stepper import SimStepper


def step_events(cluster: SimCluster) -> Counter[tuple[int, float]]:
    """The step events waiting in the loop, by (stepper, time)."""
    waiting: Counter[tuple[int, float]] = Counter()
    for when, _, fn, _args in cluster.loop._heap:
        owner = getattr(fn, "__self__", None)
        if isinstance(owner, SimStepper):
            waiting[(id(owner), when)] += 1
    return waiting


def test_a_host_keeps_one_step_event_per_time_however_often_messages_wake_it() -> None:
    cluster = SimCluster(seed=5, nodes=3)
    cluster.call("A", KeyspaceRequest(cluster.new_rid(), KeyspaceDef("ks", "siblings", 3, "sloppy")))
    most = 0
    for i in range(300):  # requests wake the hosts between their timers again and again
        put = PutRequest(cluster.new_rid(), "ks", f"k{i % 7}", b'"v"', JSON, None)
        answer = cluster.call("ABC"[i % 3], put)
        assert isinstance(answer, PutResult)
        cluster.call("ABC"[(i + 1) % 3], GetRequest(cluster.new_rid(), "ks", f"k{i % 7}"))
        most = max(most, *step_events(cluster).values())
    assert most == 1
