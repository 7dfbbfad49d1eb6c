"""Store bugs the chaos checker found with joins, decommissions and expiring hints, replayed small.

Each was found by a `bhandar chaos` seed (named in each test and in the comment at the fix in
`bhandar_cli/core/`); a chaos seed stops reproducing its bug as soon as anything else changes the
run, so each bug is also replayed here as a short deterministic scenario on the simulated cluster,
which fails again if the fix is taken out.
"""

from __future__ import annotations

from bhandar_cli.core.membership.ring import Ring, key_token
from bhandar_cli.core.model.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import context_of
from bhandar_cli.core.protocol.client_messages import Failure, GetRequest, GetResult, PutRequest, PutResult
from bhandar_cli.core.protocol.messages import (
    DecommissionRequest,
    KeyspaceRequest,
    MoveResult,
    ReplicaAck,
    ReplicaWrite,
    Send,
)
from bhandar_cli.sim.sim_cluster import SimCluster
from tests.support.sim_calls import get, put, wait_until

JSON = "application/json"


def values(c: SimCluster, via: str, key: str, level: str = "ALL", ks: str = "kv") -> list[bytes | None]:
    result = c.call(via, GetRequest(c.new_rid(), ks, key, level))
    assert isinstance(result, GetResult), result
    record = result.record
    return [] if record is None else [s.value for s in record.siblings]  # type: ignore[union-attr]


def ring_of(c: SimCluster) -> Ring:
    return c.ring_view()


def test_a_joining_node_does_not_serve_a_keyspace_it_has_not_heard_of() -> None:
    """Found by `bhandar chaos --seed 38 --ops 3000 --faults all`: a node that had just joined got a
    request for the strict keyspace before gossip told it the schema, created it with the defaults
    (sloppy), served it so, and gossip spread that definition to the whole cluster. Keyspaces are
    no longer created by use; a joining node that has not heard of one says to retry."""
    c = SimCluster(seed=4, nodes=4)
    strict = KeyspaceDef("strict", quorum="strict")
    assert not isinstance(c.call("A", KeyspaceRequest(c.new_rid(), strict)), Failure)
    c.run_for(1.0)
    c.model.partition([["E"]], [*c.hosts, "E"])  # E hears nobody yet
    c.add_node("E", "z1")
    refused = c.call("E", GetRequest(c.new_rid(), "strict", "k", "QUORUM"))
    assert isinstance(refused, Failure) and refused.code == "unavailable", refused
    c.net.heal()
    wait_until(c, lambda: c.status_of("E", "A") == "normal", 120.0)
    for name in c.members:
        assert c.hosts[name].node.keyspaces["strict"] == strict, name  # type: ignore[union-attr]


def _key_with_home(ring: Ring, n: int, wanted: set[str], outside: str) -> str:
    """A key of keyspace `kv` whose N home replicas are exactly `wanted` (and not `outside`)."""
    for i in range(10_000):
        key = f"k{i}"
        home = set(ring.preference_list(key_token("kv", key), n))
        if home == wanted and outside not in home:
            return key
    raise AssertionError("no such key")


def test_an_expired_hint_is_handed_to_a_home_replica_not_dropped() -> None:
    """Found by `bhandar chaos --seed 56 --ops 3000 --faults all`: hints expired after 3.7 s while
    both home replicas of a write acknowledged at ONE were down; the write was gone."""
    config = NodeConfig(hint_max_age=1.0, repair_interval=0, default_n=2)
    c = SimCluster(seed=7, nodes=5, zones=1, config=config)
    c.run_for(2.0)
    ring = ring_of(c)
    key = _key_with_home(ring, 2, {"A", "B"}, "E")
    c.kill("A")
    c.kill("B")
    c.run_for(config.detection_bound())
    assert put(c, "E", key, b'"only hints"', "ONE").acks == 1  # E coordinates as a fallback: a hint
    c.run_for(3.0)  # the hints are older than hint_max_age now
    assert c.metrics().hints_expired > 0
    c.revive("B")  # one home replica is back; the hint may be for A, which is still down
    c.run_for(config.detection_bound())
    c.revive("A")
    c.run_for(config.detection_bound())
    assert c.hints_pending() == 0
    assert b'"only hints"' in values(c, "C", key)


def test_a_hint_for_a_leaving_node_goes_to_the_future_replicas() -> None:
    """Found by `bhandar chaos --seed 238 --ops 3000`: a hint was handed to a node that was leaving
    after it had streamed its data away; it acknowledged, the holder dropped the hint, and the
    node left with the only copy of an acknowledged write."""
    config = NodeConfig(repair_interval=0, default_n=1)  # one replica: the hint is the only copy
    c = SimCluster(seed=3, nodes=4, zones=1, config=config)
    c.run_for(2.0)
    ring = ring_of(c)
    key = _key_with_home(ring, 1, {"C"}, "A")
    # C also holds a key whose new home, once C is gone, will be unreachable for a while: its
    # stream stalls, so C stays `leaving` (its data already streamed) while the hint comes in.
    expected_holder = ring.fallbacks(key_token("kv", key), 1)[0]
    slow_key = next(
        k
        for k in (f"s{i}" for i in range(10_000))
        if ring.preference_list(key_token("kv", k), 1) == ("C",)
        and ring.without_node("C").preference_list(key_token("kv", k), 1)[0] not in ("A", expected_holder)
    )
    (slow,) = ring.without_node("C").preference_list(key_token("kv", slow_key), 1)
    put(c, "C", slow_key, b'"slow"', "ONE")
    c.kill("C")
    c.run_for(config.detection_bound())
    put(c, "A", key, b'"hinted"', "ONE")
    holder = next(n for n in c.members if any(True for _ in c.hosts[n].store.hints()))
    assert holder == expected_holder
    c.model.partition([[holder], [slow]], c.members)  # the hint and C's stream both wait
    c.revive("C")
    c.run_for(1.0)
    answers: list[object] = []
    c.submit("C", DecommissionRequest(c.new_rid()), answers.append)
    c.run_for(config.join_delay + 1.0)  # C has begun streaming (without the hint)
    assert c.status_of("C") == "leaving"
    c.model.partition([[slow]], c.members)  # the holder is back; C still cannot reach `slow`
    c.run_for(5.0)
    c.net.heal()
    wait_until(c, lambda: bool(answers), 120.0)
    assert isinstance(answers[0], MoveResult)
    wait_until(c, lambda: all(c.status_of("C", n) == "left" for n in c.members if n != "C"), 120.0)
    c.retire("C")
    wait_until(c, lambda: c.hints_pending() == 0, 120.0)
    ring = ring_of(c)
    for k, value in ((key, b'"hinted"'), (slow_key, b'"slow"')):
        (home,) = ring.preference_list(key_token("kv", k), 1)
        record = c.hosts[home].store.get("kv", k)
        assert isinstance(record, Versioned) and [s.value for s in record.siblings] == [value], k


def test_a_node_that_left_refuses_writes() -> None:
    """Found by `bhandar chaos --seed 137 --ops 3000` (LSM storage): coordinators that had not heard
    a node left still sent it writes; it stored and acknowledged them, then was shut down."""
    c = SimCluster(seed=5, nodes=5)
    c.run_for(2.0)
    result = c.call("E", DecommissionRequest(c.new_rid()), timeout=120)
    assert isinstance(result, MoveResult)
    node = c.hosts["E"].node
    assert node is not None and c.status_of("E") == "left"
    record = Versioned(())
    ks = KeyspaceDef("kv")
    for kind in ("write", "handoff"):
        out = node.handle(c.now, "A", ReplicaWrite(7, ks, "k", record, None, kind))
        assert out == [Send("A", ReplicaAck(7, False, "E is leaving the ring"))]


def test_what_only_a_down_bootstrap_source_held_reaches_the_joiner_once_it_is_back() -> None:
    """Found by `bhandar chaos --seed 128 --ops 3000`: a joining node skipped a source that was
    down; the ranges it took over from that source lost what only that source held. The joiner
    still does not wait for it (its ranges come from their other replicas: core/roles/streaming.py),
    but nothing is lost: back, the source hands what it no longer replicates to the key's replicas."""
    config = NodeConfig(repair_interval=0, default_n=2, hinted_handoff=False)
    c = SimCluster(seed=11, nodes=4, zones=1, vnodes=16, config=config)
    c.run_for(2.0)
    ring = ring_of(c)
    keys = [f"k{i}" for i in range(300) if "B" in ring.preference_list(key_token("kv", f"k{i}"), 2)]
    for other in ("A", "C", "D"):
        c.model.cut("B", other)  # B's copies reach nobody: B alone holds these writes
    for key in keys:
        put(c, "B", key, f'"{key}"'.encode(), "ONE")
    c.kill("B")
    c.net.heal()
    c.add_node("E", "z1")
    wait_until(c, lambda: all(c.status_of("E", n) == "normal" for n in "ACDE"), 120.0)
    after = ring_of(c)
    moved = [k for k in keys if "B" not in after.preference_list(key_token("kv", k), 2)]
    assert moved, "E took none of B's ranges"
    assert all(c.hosts["E"].store.get("kv", key) is None for key in moved)  # only B has them
    c.revive("B")
    wait_until(c, lambda: all(c.hosts["E"].store.get("kv", key) is not None for key in moved), 120.0)
    for key in keys:  # those B still replicates it keeps, and a read of both replicas finds them
        assert get(c, "A", key, "ALL").record is not None, key


def test_a_dot_forgotten_by_a_pruned_context_is_not_minted_again() -> None:
    """Found by `bhandar chaos --seed 350 --ops 3000 --faults all --storage lsm`: a write's context
    was pruned past `max_vv_entries`, which dropped the smallest counter, an old dot of L; L then
    gave a new write that same dot, and every context that had seen the old one covered the new."""
    c = SimCluster(seed=2, nodes=3)
    c.run_for(2.0)

    def write(via: str, value: bytes | None, context: dict[str, int] | None) -> None:
        result = c.call(via, PutRequest(c.new_rid(), "kv", "k", value, JSON, context, "ALL"))
        assert isinstance(result, PutResult), result

    def context() -> dict[str, int]:
        result = c.call("A", GetRequest(c.new_rid(), "kv", "k", "ALL"))
        assert isinstance(result, GetResult) and isinstance(result.record, Versioned)
        return context_of(result.record.siblings)

    write("A", b'"v1"', None)  # A:1
    stale = context()  # a client that read v1 and goes quiet
    write("B", b'"v2"', None)  # B:1
    write("B", None, context())  # a delete, B:2, covers A:1 and B:1
    # Eleven entries: the coordinator prunes the smallest, A:1, and with the tombstone gone nothing
    # in the record remembers that A ever wrote.
    write("C", b'"v3"', {**context(), **{f"X{i}": 5 for i in range(9)}})
    write("A", b'"v4"', None)  # without the fix: A:1 again
    write("B", b'"v5"', stale)  # covers the *old* A:1 only
    assert b'"v4"' in values(c, "C", "k")


def test_a_leaving_node_does_not_coordinate_a_write_alone() -> None:
    """Found by `bhandar chaos --seed 105 --ops 3000` (LSM storage): a leaving node, cut off from
    the other replicas, coordinated a decrement at ONE after it had streamed its data away; its own
    copy was the only one, and it left with it."""
    config = NodeConfig(repair_interval=0, default_n=2)
    c = SimCluster(seed=6, nodes=4, zones=1, config=config)
    c.run_for(2.0)
    ring = ring_of(c)
    key = next(
        k
        for k in (f"k{i}" for i in range(10_000))
        if set(ring.preference_list(key_token("kv", k), 2)) == {"C", "D"}
    )
    (newcomer,) = set(ring.without_node("C").preference_list(key_token("kv", key), 2)) - {"D"}
    put(c, "C", key, b'"early"', "ALL")
    c.kill(newcomer)  # C's stream of the key to it stalls, so C stays `leaving`
    c.run_for(config.detection_bound())
    answers: list[object] = []
    c.submit("C", DecommissionRequest(c.new_rid()), answers.append)
    c.run_for(config.join_delay + 1.0)
    assert c.status_of("C") == "leaving"
    c.model.partition([["C"]], c.members)
    c.run_for(config.detection_bound())  # C sees every other node down
    result = c.call("C", PutRequest(c.new_rid(), "kv", key, b'"late"', JSON, None, "ONE"))
    c.net.heal()
    c.revive(newcomer)
    wait_until(c, lambda: bool(answers), 120.0)
    wait_until(c, lambda: all(c.status_of("C", n) == "left" for n in c.members if n != "C"), 120.0)
    c.retire("C")
    c.run_for(config.detection_bound())
    if isinstance(result, PutResult):  # an acknowledged write must survive C's departure
        for node in ring_of(c).preference_list(key_token("kv", key), 2):
            record = c.hosts[node].store.get("kv", key)
            assert isinstance(record, Versioned) and b'"late"' in [s.value for s in record.siblings]
    assert isinstance(result, Failure) and result.code == "unavailable", result
