"""Range movement safety on a simulated cluster: writes reach pending replicas (a down one gets a
hint), hints for a departed node reach the key's current owners, a decommission re-plans when its
stream target leaves, and a node that heard of a join late hands over what it no longer owns.

Each test builds the situation by hand (kills, partitions, a long `join_delay`) rather than
replaying a chaos seed, so it keeps failing without its fix whatever else changes a run.
"""

from __future__ import annotations

from bhandar_cli.core.membership.ring import Ring, key_token, node_tokens
from bhandar_cli.core.model.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.model.crdt import EMPTY_COUNTER, PNCounter
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.core.protocol.client_messages import Failure, GetRequest, GetResult, IncrRequest, IncrResult
from bhandar_cli.core.protocol.messages import DecommissionRequest, KeyspaceRequest, MoveResult, ReplicaWrite
from bhandar_cli.sim.sim_cluster import SimCluster
from tests.support.sim_calls import node, put, wait_until

JSON = "application/json"
STRICT = KeyspaceDef("strict", quorum="strict")


def held(c: SimCluster, name: str, key: str, ks: str = "strict") -> list[bytes | None]:
    record, _ = node(c, name).records(ks, key)
    return [] if not isinstance(record, Versioned) else [s.value for s in record.siblings]


def with_joiner(c: SimCluster, joiner: str) -> Ring:
    tokens = {**c.ring.tokens_by_node(), joiner: node_tokens(joiner, c.vnodes)}
    return Ring(tokens, {**c.ring.zones, joiner: "z1"})


def key_moving_to(before: Ring, after: Ring, joiner: str, n: int = 3) -> tuple[str, str]:
    """A key of `strict` that `joiner` takes over, and the current replica it takes it from."""
    for i in range(10_000):
        key = f"k{i}"
        token = key_token("strict", key)
        old, new = before.preference_list(token, n), after.preference_list(token, n)
        if joiner in new:
            dropped = [r for r in old if r not in new]
            return key, dropped[0]
    raise AssertionError("no key moves to the joiner")


def test_a_pending_replica_that_is_down_gets_a_hint_and_counts_in_the_acks() -> None:
    """Found by `bhandar chaos --seed 901936 --ops 8000`: D was joining and down, so it was no
    pending replica at all; a write at ONE rested on the coordinator alone, which the join then
    dropped from the key's replicas."""
    c = SimCluster(seed=5, nodes=3, zones=1, config=NodeConfig(join_delay=30.0))
    assert not isinstance(c.call("A", KeyspaceRequest(c.new_rid(), STRICT)), Failure)
    c.run_for(1.0)
    future = with_joiner(c, "D")
    key, dropped = key_moving_to(c.ring, future, "D")
    c.add_node("D", "z1")
    wait_until(c, lambda: all(c.status_of("D", n) == "joining" for n in "ABC"))
    c.kill("D")
    wait_until(c, lambda: not node(c, dropped).is_up("D", c.now))
    result = put(c, dropped, key, b'"v"', "ONE", "strict")
    # ONE needs one ack, plus one for the pending replica: the write is on a replica that stays.
    assert result.needed == 2 and result.acks >= 2, result
    assert f"{dropped} for D" in result.hinted
    assert [h["target"] for h in node(c, dropped).hints_summary(c.now)] == ["D"]
    c.revive("D")
    wait_until(c, lambda: held(c, "D", key) == [b'"v"'])


def test_a_decommission_whose_stream_target_leaves_replans_to_the_current_owners() -> None:
    """Found by `bhandar chaos --seed 999482 --ops 8000`: the decommission of F streamed to a node
    that left meanwhile and waited for it forever."""
    c = SimCluster(seed=7, nodes=5, zones=1)
    assert not isinstance(c.call("A", KeyspaceRequest(c.new_rid(), STRICT)), Failure)
    c.run_for(1.0)
    keys = [f"k{i}" for i in range(40)]
    for key in keys:
        put(c, "A", key, f'"{key}"'.encode(), "ALL", "strict")
    c.model.cut("E", "D")  # E's stream to D goes nowhere...
    c.model.cut("D", "E")
    answers: list[object] = []
    c.submit("E", DecommissionRequest(c.new_rid()), answers.append)
    wait_until(c, lambda: c.status_of("E", "A") == "leaving")
    c.run_for(2 * c.config.join_delay)
    left = c.call("D", DecommissionRequest(c.new_rid()), timeout=120)  # ... and D leaves the ring
    assert isinstance(left, MoveResult), left
    wait_until(c, lambda: all(c.status_of("D", n) == "left" for n in "ABCE"))
    c.retire("D")
    c.net.heal()
    wait_until(c, lambda: bool(answers), limit=120.0)
    assert isinstance(answers[0], MoveResult), answers[0]
    wait_until(c, lambda: all(c.status_of("E", n) == "left" for n in "ABC"))
    c.retire("E")
    for key in keys:
        result = c.call("A", GetRequest(c.new_rid(), "strict", key, "ALL"))
        assert isinstance(result, GetResult) and isinstance(result.record, Versioned), (key, result)
        assert [s.value for s in result.record.siblings] == [f'"{key}"'.encode()], key


def test_a_decommission_whose_stream_target_stays_down_stops_with_a_clear_status() -> None:
    c = SimCluster(seed=7, nodes=5, zones=1, config=NodeConfig(leave_stall=10.0))
    assert not isinstance(c.call("A", KeyspaceRequest(c.new_rid(), STRICT)), Failure)
    c.run_for(1.0)
    for i in range(40):
        put(c, "A", f"k{i}", b'"v"', "ALL", "strict")
    c.kill("D")  # a target of E's streams, down for good
    answers: list[object] = []
    c.submit("E", DecommissionRequest(c.new_rid()), answers.append)
    wait_until(c, lambda: bool(answers), limit=120.0)
    failure = answers[0]
    assert isinstance(failure, Failure) and "stream to D" in failure.error, failure
    assert "E is normal again" in failure.error
    wait_until(c, lambda: all(c.status_of("E", n) == "normal" for n in "ABCE"))
    assert node(c, "E").info(c.now)["streams"]["stopped"] == failure.error


def test_hints_for_a_leaving_node_go_to_the_keys_future_owners() -> None:
    """A leaving node refuses handoffs (it would leave with them): its hints went to it, were
    refused, and waited for as long as the decommission ran, for good if it never finished."""
    c = SimCluster(seed=7, nodes=5, zones=1, config=NodeConfig(join_delay=60.0))
    c.run_for(1.0)
    key = next(f"k{i}" for i in range(1000) if "D" in c.ring.preference_list(key_token("kv", f"k{i}"), 3))
    c.kill("D")
    wait_until(c, lambda: not node(c, "A").is_up("D", c.now))
    put(c, "A", key, b'"v"', "QUORUM", "kv")
    holders = [h for h in "ABCE" if any(s["target"] == "D" for s in node(c, h).hints_summary(c.now))]
    assert holders
    for holder in holders:  # the hints cannot reach D while it is still normal...
        c.model.cut(holder, "D")
        c.model.cut("D", holder)
    c.revive("D")
    answers: list[object] = []
    c.submit("D", DecommissionRequest(c.new_rid()), answers.append)  # ... and D starts leaving
    wait_until(c, lambda: all(c.status_of("D", n) == "leaving" for n in "ABCE"))
    c.net.heal()
    wait_until(c, lambda: not any(node(c, h).hints_summary(c.now) for h in holders), limit=20.0)
    assert c.status_of("D") == "leaving"  # the hints did not wait for the decommission to end
    owners = c.ring.without_node("D").preference_list(key_token("kv", key), 3)
    assert "D" not in owners
    assert any(held(c, o, key, ks="kv") == [b'"v"'] for o in owners)


def test_a_node_that_heard_of_a_join_late_hands_over_the_write_it_took() -> None:
    """Found by `bhandar chaos --seed 918996 --ops 8000 --faults all`: a coordinator that had not
    heard of a join sent a write to the replica the join had dropped, which took it; anti-entropy
    never looks at a node outside a range's replicas, so no read saw the write again."""
    c = SimCluster(seed=5, nodes=3, zones=1)
    assert not isinstance(c.call("A", KeyspaceRequest(c.new_rid(), STRICT)), Failure)
    c.run_for(1.0)
    future = with_joiner(c, "D")
    key, dropped = key_moving_to(c.ring, future, "D")
    c.add_node("D", "z1")
    wait_until(c, lambda: all(c.status_of("D", n) == "normal" for n in "ABCD"))
    c.run_for(1.0)
    # The write of a coordinator that still routes by the old ring, as the dropped replica gets it.
    record = Versioned((Sibling(("X", 1), {}, b'"late"', JSON, c.now),))
    sender = next(n for n in "ABC" if n != dropped)
    late = ReplicaWrite(999_999, STRICT, key, record)
    c.net.send(sender, dropped, late)
    wait_until(c, lambda: held(c, dropped, key) == [b'"late"'])
    owners = future.preference_list(key_token("strict", key), 3)
    wait_until(c, lambda: all(held(c, o, key) == [b'"late"'] for o in owners), limit=30.0)
    result = c.call("D", GetRequest(c.new_rid(), "strict", key, "ALL"))
    assert isinstance(result, GetResult) and isinstance(result.record, Versioned), result
    assert [s.value for s in result.record.siblings] == [b'"late"']


def test_a_joining_node_that_has_found_nobody_waits_instead_of_joining_alone() -> None:
    """Found by `bhandar chaos --seed 999482 --ops 8000`: a node joined while its seeds had all
    been decommissioned; it bootstrapped from nobody and became a cluster of its own."""
    c = SimCluster(seed=5, nodes=3, zones=1, addressing=True)
    c.run_for(1.0)
    c.model.partition([["D"]], [*c.hosts, "D"])  # D reaches none of its seeds
    c.add_node("D", "z1")
    c.run_for(5 * c.config.join_delay)
    assert c.status_of("D") == "joining"
    c.net.heal()
    wait_until(c, lambda: all(c.status_of("D", n) == "normal" for n in "ABCD"))
    assert set(node(c, "D").ring.nodes) == {"A", "B", "C", "D"}


def test_a_counter_keeps_the_increments_a_dropped_replica_took_late() -> None:
    """Increments as the dropped replica's own actor, taken after the join: they count once the
    replica hands the counter over, added to those of every other actor."""
    counters = KeyspaceDef("counters", policy="counter")
    c = SimCluster(seed=5, nodes=3, zones=1)
    assert not isinstance(c.call("A", KeyspaceRequest(c.new_rid(), counters)), Failure)
    c.run_for(1.0)
    future = with_joiner(c, "D")
    key = next(
        k
        for k in (f"k{i}" for i in range(10_000))
        if "D" in future.preference_list(key_token("counters", k), 3)
    )
    dropped = next(n for n in "ABC" if n not in future.preference_list(key_token("counters", key), 3))
    first = c.call("A", IncrRequest(c.new_rid(), "counters", key, 5, "r1", "ALL"))
    assert isinstance(first, IncrResult), first
    c.add_node("D", "z1")
    wait_until(c, lambda: all(c.status_of("D", n) == "normal" for n in "ABCD"))
    c.run_for(5.0)  # repair sessions begun before the join ended are over
    late = EMPTY_COUNTER.increment("X", 7, "r2")  # an actor only the dropped replica heard from
    sender = next(n for n in "ABC" if n != dropped)
    c.net.send(sender, dropped, ReplicaWrite(999_999, counters, key, late))

    def total() -> int | None:
        result = c.call("D", GetRequest(c.new_rid(), "counters", key, "ALL"))
        return (
            result.record.value
            if isinstance(result, GetResult) and isinstance(result.record, PNCounter)
            else None
        )

    wait_until(c, lambda: total() == 12, limit=30.0)
