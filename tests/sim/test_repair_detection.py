"""Background anti-entropy finds a difference no hint covers within seconds, and costs little idle.

Found by tests/e2e/test_connect_session.py under load: replicas of one range still differed 60 s
after a revive. Background repair then started one (range, peer) comparison per repair interval
and a round is every (range, peer) of every keyspace (50-156 comparisons per node on 5 nodes),
so a difference that no hint covered waited minutes for its comparison to come up. Now each
interval compares every range shared with the next peer (repair_schedule.py), so every range is
compared with every peer within about (peers x interval).
"""

from __future__ import annotations

from typing import Any

import pytest

from bhandar_cli.core.model import NodeConfig
from bhandar_cli.core.repair import RepairProbe
from bhandar_cli.node.admin import convergence_problems, convergence_ranges
from bhandar_cli.sim.sim_cluster import SimCluster
from tests.support.sim_calls import node, put

INTERVAL = NodeConfig().repair_interval
PEERS = 4  # on 5 nodes every node shares ranges with the 4 others


def ranges_shared(c: SimCluster, name: str) -> dict[str, int]:
    """How many ranges (of every keyspace) `name` shares with each other node."""
    ring = c.ring_view()
    shared = dict.fromkeys((m for m in c.members if m != name), 0)
    for ks in node(c, name).info(c.now, counts=False)["keyspaces"]:
        for rng in ring.ranges():
            prefs = ring.preference_list(rng.hi, ks["n"])
            for peer in prefs if name in prefs else ():
                if peer != name:
                    shared[peer] += 1
    return shared


def problems(c: SimCluster) -> list[str]:
    ring = c.ring_view()
    running = {name: node(c, name) for name in c.members if c.is_alive(name)}
    hashes = {name: n.range_hashes(convergence_ranges(ring)) for name, n in running.items()}
    return convergence_problems(ring, {name: [] for name in running}, hashes, {}, 3)


def seconds_to_converge_without_hints(seed: int) -> float:
    """A node cut off briefly misses writes at ONE, and no hint is kept for it: only background
    anti-entropy brings them. Simulated seconds from the heal until every replica agrees."""
    c = SimCluster(seed=seed, nodes=5, config=NodeConfig(hinted_handoff=False, read_repair=False))
    c.run_for(3.0)
    names = list(c.members)
    cut, majority = names[-1], names[:-1]
    c.model.partition([[cut], majority], names)
    for i in range(100):
        put(c, majority[i % len(majority)], f"k{i}", b'"v"', "ONE")
    assert problems(c)  # the cut-off node misses them
    c.net.heal()
    healed = c.now
    assert c.loop.run_until_true(lambda: not problems(c), healed + 600.0), problems(c)[:3]
    assert sum(node(c, name).metrics.keys_repaired for name in names) > 0  # repair did it
    return c.now - healed


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_a_difference_no_hint_covers_is_repaired_within_a_round_of_peers(seed: int) -> None:
    # Before: 8-100+ s on these seeds (the cut node's ranges came up one per 2 s).
    assert seconds_to_converge_without_hints(seed) <= (PEERS + 2) * INTERVAL + 2.0


def test_every_range_is_compared_with_every_peer_within_a_round_of_peers() -> None:
    c = SimCluster(seed=11, nodes=5)
    c.run_for(5.0 + (PEERS + 1) * INTERVAL)  # membership settles, then one round
    for name in c.members:
        repair = node(c, name).info(c.now, counts=False)["repair"]
        assert repair["ranges"] > 0 and repair["never"] == 0, (name, repair["never"])
        assert repair["oldest_s"] is not None and repair["oldest_s"] <= (PEERS + 1) * INTERVAL


def test_an_idle_cluster_sends_one_probe_per_range_shared_with_one_peer_per_interval() -> None:
    c = SimCluster(seed=12, nodes=5)
    c.run_for(30.0)  # settled, every replica agrees
    assert not problems(c)
    probes: dict[str, list[RepairProbe]] = {name: [] for name in c.members}

    def counting(host: Any, name: str) -> None:
        send = host.send

        def counted(src: str, dst: str, msg: Any) -> None:
            if isinstance(msg, RepairProbe):
                probes[name].append(msg)
            send(src, dst, msg)

        host.send = counted

    for name in c.members:
        counting(c.hosts[name], name)
    sessions = {name: node(c, name).metrics.repair_sessions for name in c.members}
    intervals = 20
    c.run_for(intervals * INTERVAL)
    for name in c.members:
        shared = ranges_shared(c, name)
        started = node(c, name).metrics.repair_sessions - sessions[name]
        # Every comparison ended at the root: one probe each, nothing to descend into.
        assert len(probes[name]) == started
        assert all(p.probe.level == 0 for p in probes[name])
        # At most one peer's ranges per interval (one more turn may fall inside the window).
        assert started <= (intervals + 1) * max(shared.values())
        # And a full round's worth: every range with every peer about once per PEERS intervals.
        assert started >= (intervals // PEERS - 1) * sum(shared.values())
