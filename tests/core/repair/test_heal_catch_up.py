"""A replica back after a partition, in the simulator: how soon its hints come home and its
replicas agree (the mechanism `bhandar bench repair` times on processes)."""

from __future__ import annotations

from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.core.protocol.client_messages import PutRequest, PutResult
from bhandar_cli.core.protocol.messages import Result
from bhandar_cli.sim.sim_cluster import SimCluster

JSON = "application/json"
# Anti-entropy off: only hinted handoff brings the isolated replica up to date here.
CONFIG = NodeConfig(repair_interval=0)


def isolate_and_write(seed: int, keys: int) -> tuple[SimCluster, list[str]]:
    """E partitioned away (and seen down), then `keys` keys E replicates written at ONE through
    the majority, all in flight at once; E's copies are all hints by the end."""
    c = SimCluster(seed=seed, nodes=5, config=CONFIG)
    c.run_for(2.0)
    c.net.model.partition([["E"]], c.ring.nodes)
    c.run_for(c.config.detection_bound())
    names = (f"k{i}" for i in range(10 * keys))
    mine = [k for k in names if "E" in c.ring.preference_list(key_token("kv", k), 3)][:keys]
    answers: list[Result] = []
    for i, key in enumerate(mine):
        request = PutRequest(c.new_rid(), "kv", key, b"1", JSON, None, "ONE")
        c.submit("ABCD"[i % 4], request, answers.append)
    assert c.loop.run_until_true(lambda: len(answers) == len(mine), c.now + 30)
    assert all(isinstance(a, PutResult) for a in answers)
    c.run_for(1.0)  # at ONE the answer may leave before the fallback's copy is stored
    assert c.hints_pending() == len(mine)
    return c, mine


def heal_and_time_hints(c: SimCluster) -> tuple[float, float, float]:
    """Heal; simulated seconds until every holder sees E up, until E holds a first hinted
    record, and until no node holds a hint."""
    c.net.heal()
    healed = c.now
    holders = [n for n in "ABCD" if any(True for _ in c.hosts[n].store.hints())]
    assert c.loop.run_until_true(lambda: all(c.hosts[n].node.is_up("E", c.now) for n in holders), c.now + 10)  # type: ignore[union-attr]
    seen_up = c.now - healed
    assert c.loop.run_until_true(lambda: c.metrics().hints_delivered > 0, c.now + 10)
    first = c.now - healed
    assert c.loop.run_until_true(lambda: c.hints_pending() == 0, c.now + 60)
    return seen_up, first, c.now - healed


def test_hints_of_a_healed_replica_go_home_as_soon_as_it_is_seen_up_batch_after_batch() -> None:
    c, keys = isolate_and_write(seed=3, keys=1200)
    holders = sum(1 for h in c.hosts.values() if any(True for _ in h.store.hints()))
    per_holder = -(-len(keys) // holders)
    seen_up, first, took = heal_and_time_hints(c)
    # Not at the next delivery interval: within a round trip of gossip seeing E back.
    assert first - seen_up < 0.1, (seen_up, first)
    # One batch per delivery interval would take per_holder / hint_batch intervals (over 3 s
    # here); batch after batch it takes their round trips.
    assert took - first < c.config.hint_delivery_interval * per_holder / c.config.hint_batch / 3, took
    assert all(c.hosts["E"].store.get("kv", k) is not None for k in keys)


def test_delivery_after_a_heal_is_the_same_in_every_run_of_a_seed() -> None:
    runs = []
    for _ in range(2):
        c, _keys = isolate_and_write(seed=8, keys=300)
        runs.append((heal_and_time_hints(c), c.metrics().hints_delivered))
    assert runs[0] == runs[1]
