"""Ownership handoff never brings a deleted value back: a node that has handed over a key it no
longer replicates does not send its aging copy again, after a restart or a later ring change.

The scenario is built by hand on a simulated cluster (a join, a delete, anti-entropy rounds that
reap the tombstone, a restart), so it keeps failing without the fix whatever else changes a run.
"""

from __future__ import annotations

from bhandar_cli.core.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.messages import (
    Failure,
    GetRequest,
    GetResult,
    KeyspaceRequest,
    PutRequest,
    PutResult,
    RepairRequest,
)
from bhandar_cli.core.records import Record, Versioned
from bhandar_cli.core.ring import Ring, key_token, node_tokens
from bhandar_cli.core.versions import context_of
from bhandar_cli.sim.cluster import SimCluster

JSON = "application/json"
STRICT = KeyspaceDef("strict", quorum="strict")


def stored(c: SimCluster, name: str, key: str) -> Record | None:
    return c.hosts[name].store.get("strict", key)


def replicas(ring: Ring, key: str) -> tuple[str, ...]:
    return ring.preference_list(key_token("strict", key), 3)


def get_all(c: SimCluster, via: str, key: str) -> GetResult:
    result = c.call(via, GetRequest(c.new_rid(), "strict", key, "ALL"))
    assert isinstance(result, GetResult), result
    return result


def test_a_handed_over_copy_is_not_sent_again_after_its_key_was_deleted_and_reaped() -> None:
    config = NodeConfig(tombstone_grace=5.0)
    c = SimCluster(seed=5, nodes=3, zones=1, config=config)
    assert not isinstance(c.call("A", KeyspaceRequest(c.new_rid(), STRICT)), Failure)
    c.run_for(1.0)
    future = Ring({**c.ring.tokens_by_node(), "D": node_tokens("D", c.vnodes)}, {**c.ring.zones, "D": "z1"})
    key = next(k for k in (f"k{i}" for i in range(10_000)) if "D" in replicas(future, k))
    owners = replicas(future, key)
    dropped = next(n for n in "ABC" if n not in owners)
    put = c.call("A", PutRequest(c.new_rid(), "strict", key, b'"v"', JSON, None, "ALL"))
    assert isinstance(put, PutResult), put
    c.add_node("D", "z1")
    assert c.loop.run_until_true(lambda: all(c.status_of("D", n) == "normal" for n in "ABCD"), c.now + 60)
    c.run_for(30.0)  # the dropped replica walks its store and hands the key over
    seen = get_all(c, "D", key).record
    assert isinstance(seen, Versioned)
    delete = PutRequest(c.new_rid(), "strict", key, None, JSON, context_of(seen.siblings), "ALL")
    assert isinstance(c.call("D", delete), PutResult)
    c.run_for(config.tombstone_grace + 1)
    for _ in range(3):  # every owner must see every other hold the tombstone before it reaps
        for name in owners:
            c.call(name, RepairRequest(c.new_rid()), timeout=30)
            c.run_for(0.5)
    assert all(stored(c, o, key) is None for o in owners), "the tombstone was not reaped"
    assert isinstance(stored(c, dropped, key), Versioned)  # the dropped replica keeps its copy...
    c.kill(dropped)
    c.run_for(2.0)
    c.revive(dropped)
    c.run_for(60.0)  # ... and its walks after the restart must not send it again
    after = get_all(c, "D", key).record
    values = (
        [] if not isinstance(after, Versioned) else [s.value for s in after.siblings if s.value is not None]
    )
    assert values == [], f"the deleted value is back: {after}"
