"""Ownership handoff never brings a deleted value back: a node drops the copy of a key it no longer
replicates once the key's replicas acknowledged it, so neither a restart (its walk would send the
copy again) nor the range moving back to it (anti-entropy would spread the copy) resurrects a
key deleted and reaped meanwhile. A counter is kept (its actor must not forget its entry) and its
replicas count every increment.

The scenario is built by hand on a simulated cluster (a join, a delete, anti-entropy rounds that
reap the tombstone, a restart, a decommission), so it keeps failing without the fix whatever else
changes a run.
"""

from __future__ import annotations

from bhandar_cli.core.membership.ring import Ring, key_token, node_tokens
from bhandar_cli.core.model.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.model.crdt import PNCounter
from bhandar_cli.core.model.records import Record, Versioned
from bhandar_cli.core.model.versions import context_of
from bhandar_cli.core.protocol.client_messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
)
from bhandar_cli.core.protocol.messages import DecommissionRequest, KeyspaceRequest, MoveResult, RepairRequest
from bhandar_cli.sim.sim_cluster import SimCluster

JSON = "application/json"
KV = KeyspaceDef("strict", quorum="strict")
COUNTERS = KeyspaceDef("tally", policy="counter", quorum="strict")


def replicas(ring: Ring, keyspace: str, key: str) -> tuple[str, ...]:
    return ring.preference_list(key_token(keyspace, key), 3)


def moving_key(before: Ring, after: Ring, keyspace: str) -> tuple[str, str]:
    """A key that the join of D takes from one of A, B, C, and the node it takes it from."""
    for i in range(10_000):
        key = f"k{i}"
        old, new = replicas(before, keyspace, key), replicas(after, keyspace, key)
        if "D" in new:
            return key, next(n for n in old if n not in new)
    raise AssertionError("no key moves to D")


def stored(c: SimCluster, name: str, keyspace: str, key: str) -> Record | None:
    return c.hosts[name].store.get(keyspace, key)


def get_all(c: SimCluster, via: str, keyspace: str, key: str) -> Record | None:
    result = c.call(via, GetRequest(c.new_rid(), keyspace, key, "ALL"))
    assert isinstance(result, GetResult), result
    return result.record


def repair_rounds(c: SimCluster, nodes: str, rounds: int) -> None:
    for _ in range(rounds):  # every replica must see every other hold a tombstone before it reaps
        for name in nodes:
            c.call(name, RepairRequest(c.new_rid()), timeout=30)
            c.run_for(0.5)


def test_a_handed_over_copy_is_dropped_so_a_reaped_delete_stays_deleted() -> None:
    config = NodeConfig(tombstone_grace=5.0)
    c = SimCluster(seed=5, nodes=3, zones=1, config=config)
    for ks in (KV, COUNTERS):
        assert not isinstance(c.call("A", KeyspaceRequest(c.new_rid(), ks)), Failure)
    c.run_for(1.0)
    future = Ring({**c.ring.tokens_by_node(), "D": node_tokens("D", c.vnodes)}, {**c.ring.zones, "D": "z1"})
    key, dropped = moving_key(c.ring, future, "strict")
    tally, counted = moving_key(c.ring, future, "tally")
    assert isinstance(
        c.call("A", PutRequest(c.new_rid(), "strict", key, b'"v"', JSON, None, "ALL")), PutResult
    )
    for name in "ABC":  # every node an actor of the counter
        assert isinstance(
            c.call(name, IncrRequest(c.new_rid(), "tally", tally, 1, f"r{name}", "ALL")), IncrResult
        )
    c.add_node("D", "z1")
    assert c.loop.run_until_true(lambda: all(c.status_of("D", n) == "normal" for n in "ABCD"), c.now + 60)
    c.run_for(30.0)  # the dropped replicas walk their stores and hand their keys over
    assert stored(c, dropped, "strict", key) is None  # handed over: dropped
    assert isinstance(stored(c, counted, "tally", tally), PNCounter)  # a counter is kept
    total = get_all(c, "D", "tally", tally)
    assert isinstance(total, PNCounter) and total.value == 3, total

    seen = get_all(c, "D", "strict", key)
    assert isinstance(seen, Versioned)
    delete = PutRequest(c.new_rid(), "strict", key, None, JSON, context_of(seen.siblings), "ALL")
    assert isinstance(c.call("D", delete), PutResult)
    c.run_for(config.tombstone_grace + 1)
    repair_rounds(c, "".join(replicas(future, "strict", key)), 3)
    assert all(stored(c, o, "strict", key) is None for o in replicas(future, "strict", key)), "not reaped"

    c.kill(dropped)  # a restart walks the store again...
    c.run_for(2.0)
    c.revive(dropped)
    c.run_for(30.0)
    left = c.call("D", DecommissionRequest(c.new_rid()), timeout=120)  # ... and the range moves back
    assert isinstance(left, MoveResult), left
    assert c.loop.run_until_true(lambda: all(c.status_of("D", n) == "left" for n in "ABC"), c.now + 60)
    c.retire("D")
    repair_rounds(c, "ABC", 2)
    after = get_all(c, "A", "strict", key)
    values = (
        [] if not isinstance(after, Versioned) else [s.value for s in after.siblings if s.value is not None]
    )
    assert values == [], f"the deleted value is back: {after}"
    total = get_all(c, "A", "tally", tally)
    assert isinstance(total, PNCounter) and total.value == 3, total


def test_a_handed_over_copy_stays_until_every_node_has_heard_of_the_move() -> None:
    """`bhandar chaos --seed 226736680 --ops 2000`: the node a join took a key from dropped its
    copy as soon as the joiner acknowledged it, while a coordinator that had not heard the join
    was done still read from it as a replica, and a read at ONE found nothing (where R + W > N).
    The copy now stays until the ring has stood still for the detection bound."""
    c = SimCluster(seed=5, nodes=3, zones=1)
    assert not isinstance(c.call("A", KeyspaceRequest(c.new_rid(), KV)), Failure)
    c.run_for(1.0)
    future = Ring({**c.ring.tokens_by_node(), "D": node_tokens("D", c.vnodes)}, {**c.ring.zones, "D": "z1"})
    key, dropped = moving_key(c.ring, future, "strict")
    put = PutRequest(c.new_rid(), "strict", key, b'"v"', JSON, None, "ALL")
    assert isinstance(c.call("A", put), PutResult)
    c.add_node("D", "z1")
    assert c.loop.run_until_true(lambda: all(c.status_of("D", n) == "normal" for n in "ABCD"), c.now + 60)
    c.run_for(1.0)  # D has the key by now (ownership handoff or the join's stream)
    assert isinstance(stored(c, "D", "strict", key), Versioned)
    assert isinstance(stored(c, dropped, "strict", key), Versioned), "dropped while the ring still moves"
    c.run_for(c.config.detection_bound() + 12.0)  # settled, and the next walk has come
    assert stored(c, dropped, "strict", key) is None
