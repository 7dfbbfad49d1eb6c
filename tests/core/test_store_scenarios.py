"""The store's behaviour end to end, through the deterministic simulator (no sockets, no sleeps).

The first tests tell the seed's stories (the cart, a delete, a node that dies, a strict quorum,
read repair); the last ones replay bugs the chaos checker found, each named after its seed.
"""

from __future__ import annotations

import json
from typing import Any

from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import JSON, context_of, exact_actor
from bhandar_cli.core.protocol.client_messages import Failure, GetRequest, GetResult, PutRequest, PutResult
from bhandar_cli.core.protocol.messages import KeyspaceRequest, Result
from bhandar_cli.sim.sim_cluster import SimCluster
from tests.support.keyspace_setup import create_keyspace

KS = "carts"


def put(
    c: SimCluster, via: str, key: str, value: object, ctx: dict[str, int] | None, level: str = "QUORUM"
) -> Result:
    data = None if value is None else json.dumps(value).encode()
    return c.call(via, PutRequest(c.new_rid(), KS, key, data, JSON, ctx, level))


def get(c: SimCluster, via: str, key: str, level: str = "QUORUM") -> GetResult:
    result = c.call(via, GetRequest(c.new_rid(), KS, key, level))
    assert isinstance(result, GetResult), result
    return result


def values(result: GetResult) -> list[Any]:
    record = result.record
    if record is None:
        return []
    assert isinstance(record, Versioned)
    return [json.loads(s.value) for s in record.siblings if s.value is not None]


def context(result: GetResult) -> dict[str, int]:
    assert isinstance(result.record, Versioned)
    return context_of(result.record.siblings)


def stored_values(c: SimCluster, node: str, key: str, keyspace: str = KS) -> list[Any]:
    record = c.hosts[node].store.get(keyspace, key)
    if record is None:
        return []
    assert isinstance(record, Versioned)
    return [json.loads(s.value) for s in record.siblings if s.value is not None]


def home(c: SimCluster, key: str, keyspace: str = KS, n: int = 3) -> tuple[str, ...]:
    return c.ring.preference_list(key_token(keyspace, key), n)


def detect(c: SimCluster) -> None:
    """Let the failure detector notice kills, revivals and partitions (its stated bound)."""
    c.run_for(c.config.detection_bound())


def test_cart_story_siblings_then_merge() -> None:
    c = SimCluster(seed=1, nodes=3, zones=3)
    create_keyspace(c, KS)
    assert isinstance(put(c, "A", "cart:42", ["rice"], None), PutResult)
    ctx = context(get(c, "C", "cart:42"))
    c.model.partition([["A"], ["B", "C"]], c.ring.nodes)
    detect(c)
    assert isinstance(put(c, "A", "cart:42", ["rice", "oil"], ctx, "ONE"), PutResult)
    assert isinstance(put(c, "B", "cart:42", ["rice", "salt"], ctx, "QUORUM"), PutResult)
    c.net.heal()
    detect(c)
    both = get(c, "C", "cart:42", "ALL")
    assert sorted(values(both)) == [["rice", "oil"], ["rice", "salt"]]
    merged = put(c, "C", "cart:42", ["oil", "rice", "salt"], context(both))
    assert isinstance(merged, PutResult)
    assert values(get(c, "A", "cart:42", "ALL")) == [["oil", "rice", "salt"]]
    c.run_for(1.0)
    for node in "ABC":
        assert stored_values(c, node, "cart:42") == [["oil", "rice", "salt"]]


def test_delete_leaves_a_tombstone_a_stale_replica_cannot_undo() -> None:
    # Background anti-entropy off: its round would give C the tombstone within seconds of its
    # revival, before the read this test makes finds C stale.
    c = SimCluster(seed=2, nodes=3, zones=3, config=NodeConfig(repair_interval=0))
    create_keyspace(c, KS)
    assert isinstance(put(c, "A", "k", "v1", None, "ALL"), PutResult)
    ctx = context(get(c, "A", "k", "ALL"))
    c.kill("C")  # C keeps v1 and misses the delete
    detect(c)
    assert isinstance(put(c, "A", "k", None, ctx), PutResult)
    c.revive("C")
    detect(c)
    assert stored_values(c, "C", "k") == ["v1"]
    after = get(c, "B", "k", "ALL")
    assert values(after) == []
    assert isinstance(after.record, Versioned) and after.record.siblings[0].tombstone
    c.run_for(1.0)
    for node in "ABC":
        assert stored_values(c, node, "k") == []
        record = c.hosts[node].store.get(KS, "k")
        assert isinstance(record, Versioned) and all(s.tombstone for s in record.siblings)


def test_killed_home_replica_gets_the_write_back_through_a_hint() -> None:
    c = SimCluster(seed=3, nodes=5, zones=3)
    create_keyspace(c, KS)
    key = "cart:1"
    homes = home(c, key)
    victim = homes[1]
    c.kill(victim)
    detect(c)
    result = put(c, homes[0], key, "through a fallback", None)
    assert isinstance(result, PutResult), result
    assert result.acks >= 2 and len(result.hinted) == 1
    fallback = result.hinted[0].split(" for ")[0]
    assert result.hinted[0] == f"{fallback} for {victim}"
    assert fallback not in homes
    assert c.hosts[fallback].store.get(KS, key) is None  # held as a hint, not as its own data
    assert [t for (t, _, _), _, _ in c.hosts[fallback].store.hints()] == [victim]
    c.revive(victim)
    c.run_for(3.0)
    assert stored_values(c, victim, key) == ["through a fallback"]
    assert not list(c.hosts[fallback].store.hints())
    assert c.metrics().hints_delivered == 1


def test_strict_quorum_with_two_of_three_down_is_unavailable() -> None:
    c = SimCluster(seed=4, nodes=5, zones=3)
    create_keyspace(c, KS)
    assert not isinstance(
        c.call("A", KeyspaceRequest(c.new_rid(), KeyspaceDef("ledger", quorum="strict"))), Failure
    )
    c.run_for(0.5)
    homes = c.ring.preference_list(key_token("ledger", "acct"), 3)
    c.kill(homes[1])
    c.kill(homes[2])
    detect(c)
    result = c.call(homes[0], PutRequest(c.new_rid(), "ledger", "acct", b"1", JSON, None, "QUORUM"))
    assert isinstance(result, Failure)
    assert result.code == "unavailable"
    assert "1 of 3 replicas reachable, QUORUM needs 2" in result.error
    assert (result.answered, result.needed) == (1, 2)


def test_read_repair_fixes_a_replica_that_missed_a_write_and_counts_it() -> None:
    c = SimCluster(seed=5, nodes=3, zones=3)
    create_keyspace(c, KS)
    coordinator, _, laggard = home(c, "k")
    c.model.cut(coordinator, laggard)
    assert isinstance(put(c, coordinator, "k", "new", None), PutResult)
    c.run_for(0.5)
    assert stored_values(c, laggard, "k") == []
    c.net.heal()
    assert values(get(c, coordinator, "k", "ALL")) == ["new"]
    c.run_for(0.5)
    assert stored_values(c, laggard, "k") == ["new"]
    metrics = c.metrics()
    assert metrics.stale_reads == 1 and metrics.read_repairs == 1


# --- bugs the chaos checker found ----------------------------------------------------------------


def test_read_repair_merges_into_the_coordinators_current_copy() -> None:
    """`bhandar chaos --seed 1 --ops 2000`: read repair overwrote the coordinator's own copy with
    the merge of replies gathered before a newer write landed there, so the write vanished from it
    and the coordinator later handed out the same dot again."""
    c = SimCluster(seed=6, nodes=3, zones=3)
    create_keyspace(c, KS)
    a, b, cc = home(c, "k")
    c.model.cut(a, b)  # b misses v0, so it is stale when it coordinates the read
    assert isinstance(put(c, a, "k", "v0", None), PutResult)
    c.run_for(0.5)
    c.net.heal()
    c.model.clog(a, b)  # hold the read's replies...
    c.model.clog(cc, b)
    box: list[Result] = []
    c.submit(b, GetRequest(c.new_rid(), KS, "k", "ALL"), box.append)
    c.run_for(0.05)
    assert isinstance(put(c, b, "k", "v1", None, "ONE"), PutResult)  # ...while b takes a write
    c.net.unclog(a, b)
    c.net.unclog(cc, b)
    c.run_for(0.5)
    assert box and isinstance(box[0], GetResult)
    assert sorted(stored_values(c, b, "k")) == ["v0", "v1"]
    assert isinstance(put(c, b, "k", "v2", None, "ONE"), PutResult)
    c.run_for(0.5)
    record = c.hosts[b].store.get(KS, "k")
    assert isinstance(record, Versioned)
    assert sorted(json.loads(s.value) for s in record.siblings if s.value) == ["v0", "v1", "v2"]
    assert len({s.dot for s in record.siblings}) == 3


def test_a_duplicated_forwarded_put_is_stored_once() -> None:
    """`bhandar chaos --seed 2 --ops 2000`: the network delivered a forwarded put twice and the
    coordinator stored it twice, as two siblings with the same value."""
    c = SimCluster(seed=7, nodes=5, zones=3)
    create_keyspace(c, KS)
    key = "cart:3"
    outsider = next(n for n in c.ring.nodes if n not in home(c, key))
    c.model.duplicate = 1.0  # every message twice
    assert isinstance(put(c, outsider, key, "once", None), PutResult)
    c.model.duplicate = 0.0
    c.run_for(0.5)
    assert values(get(c, home(c, key)[0], key, "ALL")) == ["once"]


def test_replies_to_a_previous_life_are_not_taken_for_new_ones() -> None:
    """`bhandar chaos --seed 189 --ops 2000 --faults all`: a node restarted, numbered its requests
    from 1 again, and a late reply to a read of its previous life was merged into a read of
    another key (and read-repaired into it)."""
    c = SimCluster(seed=8, nodes=3, zones=3)
    create_keyspace(c, KS)
    # Written through B and C (not A), so the read below is the first request A numbers in each
    # life, and with different dots, so a mixed-up merge would show both values.
    assert isinstance(put(c, "C", "k1", "from k1", None, "ALL"), PutResult)
    assert isinstance(put(c, "B", "k2", "from k2", None, "ALL"), PutResult)
    c.model.clog("B", "A")
    c.model.clog("C", "A")
    c.submit("A", GetRequest(c.new_rid(), KS, "k1", "ALL"), lambda _: None)
    c.run_for(0.05)
    c.kill("A")
    c.revive("A")
    box: list[Result] = []
    c.submit("A", GetRequest(c.new_rid(), KS, "k2", "ALL"), box.append)
    c.run_for(0.05)
    c.net.unclog("B", "A")  # the old replies (about k1) arrive first
    c.net.unclog("C", "A")
    c.run_for(0.5)
    assert box and isinstance(box[0], GetResult)
    assert values(box[0]) == ["from k2"]
    assert stored_values(c, "A", "k2") == ["from k2"]


def test_a_fallback_forwards_writes_while_a_home_replica_is_up() -> None:
    """`bhandar chaos --seed 2138 --ops 5000 --faults all`: fallbacks coordinated writes while home
    replicas were up, each under a new actor, until contexts were pruned and replicas no longer
    converged after one round of read repair. The fallback forwards the put to a home replica,
    under the exact dot it mints for it (one actor of its own for every such put)."""
    c = SimCluster(seed=9, nodes=5, zones=3)
    create_keyspace(c, KS)
    key = "cart:2"
    homes = home(c, key)
    c.kill(homes[2])
    detect(c)
    fallback = c.ring.fallbacks(key_token(KS, key), 3)[0]
    result = put(c, fallback, key, "v", None)
    assert isinstance(result, PutResult)
    assert result.coordinator in homes
    record = get(c, homes[0], key).record
    assert isinstance(record, Versioned)
    assert [s.dot for s in record.siblings] == [(exact_actor(fallback), 1)]


def test_a_fallback_coordinates_when_no_home_replica_is_up() -> None:
    c = SimCluster(seed=10, nodes=5, zones=5)
    create_keyspace(c, KS)
    key = "cart:2"
    for node in home(c, key):
        c.kill(node)
    detect(c)
    fallback = c.ring.fallbacks(key_token(KS, key), 3)[0]
    result = put(c, fallback, key, "v", None, "ONE")
    assert isinstance(result, PutResult), result
    assert result.coordinator == fallback


def test_config_bug_switch_acknowledges_before_quorum() -> None:
    """The planted bug the chaos tests use: with it, a QUORUM put is acknowledged on one copy."""
    c = SimCluster(seed=11, nodes=3, zones=3, config=NodeConfig(bugs=frozenset({"ack_before_quorum"})))
    create_keyspace(c, KS)
    coordinator, other, third = home(c, "k")
    c.model.cut(coordinator, other)
    c.model.cut(coordinator, third)
    result = put(c, coordinator, "k", "v", None)
    assert isinstance(result, PutResult) and result.acks == 1
