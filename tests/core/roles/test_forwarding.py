"""Forwarding falls back, through the deterministic simulator: a forwarded put whose coordinator
does not answer in time goes to the next live replica (or is coordinated by the forwarder) while a
quorum is reachable, under the one exact dot its forwarder minted, so it stays one write; a
forwarded increment never does, since it could count twice. And what becomes of an exact dot no
coordinator stored (core/roles/exact_dots.py)."""

from __future__ import annotations

from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.model.metrics import NodeMetrics
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import JSON, context_of, exact_actor
from bhandar_cli.core.protocol.client_messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
)
from bhandar_cli.core.protocol.messages import KeyspaceRequest
from bhandar_cli.sim.sim_cluster import SimCluster

KS = "kv"


def a_key(c: SimCluster, keyspace: str, first: str, outsider: str) -> str:
    """A key whose first home replica is `first` and of which `outsider` is not a home replica."""
    for i in range(10_000):
        home = c.ring.preference_list(key_token(keyspace, f"k{i}"), 3)
        if home[0] == first and outsider not in home:
            return f"k{i}"
    raise AssertionError("no such key")


def put(c: SimCluster, via: str, key: str, value: bytes, level: str = "QUORUM") -> PutResult | Failure:
    result = c.call(via, PutRequest(c.new_rid(), KS, key, value, JSON, None, level, trace=True))
    assert isinstance(result, PutResult | Failure)
    return result


def metrics(c: SimCluster, name: str) -> NodeMetrics:
    node = c.hosts[name].node
    assert node is not None
    return node.metrics


def live_values(c: SimCluster, node: str, key: str) -> list[tuple[bytes | None, tuple[str, int]]]:
    record = c.hosts[node].store.get(KS, key)
    assert isinstance(record, Versioned)
    return sorted((s.value, s.dot) for s in record.siblings)


def test_a_put_forwarded_to_a_node_just_cut_off_falls_back_to_the_next_replica() -> None:
    """The issue's case: right after `partition A | B C D E`, a put via B whose first home replica
    is A. B still believes A up, forwards to A, hears nothing, and hands the put to the next one."""
    c = SimCluster(seed=21, nodes=5, zones=5)
    key = a_key(c, KS, "A", "B")
    home = c.ring.preference_list(key_token(KS, key), 3)
    c.model.partition([["A"], ["B", "C", "D", "E"]], c.ring.nodes)
    result = put(c, "B", key, b'"v"')
    assert isinstance(result, PutResult), result
    assert result.coordinator == home[1]
    steps = [text for _, text in result.trace]
    assert steps[0] == "B forwards to A as B~x:1"
    assert steps[1].startswith("A did not answer within")
    assert steps[2] == "B falls back: a coordinator other than A"
    assert steps[3] == f"B forwards to {home[1]} as B~x:1"
    assert steps[4] == f"{home[1]} coordinates put {KS}/{key} as B~x:1, needs 2"
    times = [ms for ms, _ in result.trace]
    assert times == sorted(times) and times[1] >= 2 * c.config.request_timeout * 1000
    assert metrics(c, "B").forward_fallbacks == 1
    c.run_for(0.5)
    for node in home[1:]:
        assert [v for v, _ in live_values(c, node, key)] == [b'"v"']


def test_a_fallback_node_coordinates_itself_when_no_other_home_replica_is_up() -> None:
    c = SimCluster(seed=22, nodes=5, zones=5)
    key = a_key(c, KS, "A", "B")
    token = key_token(KS, key)
    home = c.ring.preference_list(token, 3)
    for node in home[1:]:
        c.kill(node)
    c.run_for(c.config.detection_bound())
    forwarder = c.ring.fallbacks(token, 3)[0]
    c.model.partition([["A"], [n for n in c.ring.nodes if n != "A"]], c.ring.nodes)
    result = put(c, forwarder, key, b'"w"')
    assert isinstance(result, PutResult), result
    assert result.coordinator == forwarder
    steps = [text for _, text in result.trace]
    assert steps[:3] == [
        f"{forwarder} forwards to A as {forwarder}~x:1",
        steps[1],
        f"{forwarder} falls back: a coordinator other than A",
    ]
    assert steps[3].startswith(f"{forwarder} coordinates put {KS}/{key} as {forwarder}~x:1")


def test_a_put_whose_first_coordinator_was_only_slow_is_one_write_under_one_dot() -> None:
    """The fallback and the slow first coordinator both apply the put, under the exact dot the
    forwarder minted: one sibling, wherever it is read (it was two, under two dots, before)."""
    c = SimCluster(seed=23, nodes=5, zones=5)
    key = a_key(c, KS, "A", "B")
    home = c.ring.preference_list(key_token(KS, key), 3)
    c.model.set_delay("A", 1.5)  # A answers, but only after the forwarder's timeout
    result = put(c, "B", key, b'"slow"')
    assert isinstance(result, PutResult) and result.coordinator == home[1], result
    c.model.set_delay("A", 0.0)
    c.run_for(5.0)
    read = c.call(home[1], GetRequest(c.new_rid(), KS, key, "ALL"))
    assert isinstance(read, GetResult) and isinstance(read.record, Versioned)
    assert [(s.value, s.dot) for s in read.record.siblings] == [(b'"slow"', ("B~x", 1))]
    assert live_values(c, "A", key) == [(b'"slow"', ("B~x", 1))]  # A applied it too


def test_a_forwarded_increment_that_is_not_answered_is_an_unknown_outcome_never_retried() -> None:
    c = SimCluster(seed=24, nodes=5, zones=5)
    key = a_key(c, "counters", "A", "B")
    c.model.partition([["A"], ["B", "C", "D", "E"]], c.ring.nodes)
    result = c.call("B", IncrRequest(c.new_rid(), "counters", key, 5, "r-1", trace=True))
    assert isinstance(result, Failure) and result.code == "timeout"
    assert "the outcome is unknown" in result.error and "count twice" in result.error
    assert result.trace[0][1] == "B forwards to A"
    assert metrics(c, "B").forward_fallbacks == 0
    c.net.release(c.model.heal())
    c.run_for(5.0)
    read = c.call("C", GetRequest(c.new_rid(), "counters", key, "ALL"))
    assert isinstance(read, GetResult)
    after = c.call("C", IncrRequest(c.new_rid(), "counters", key, 1, "r-2"))
    assert isinstance(after, IncrResult) and after.value == 1  # A never got it: counted nowhere


def test_a_write_that_read_one_copy_of_a_put_taken_twice_replaces_both() -> None:
    """What `bhandar check -w dynamo-kv` found at seeds 202, 204, 205 (five nodes, partition, kill,
    slow): a write made with the context of a read that met only the fallback's copy of a put, and
    the slow first coordinator's copy arriving later. With a dot per coordinator the later copy
    was not covered and came back beside the write that had read it (a false sibling). With the
    forwarder's exact dot both copies are one dot, and the write replaces it wherever it lands."""
    c = SimCluster(seed=23, nodes=5, zones=5)
    key = a_key(c, KS, "A", "B")
    home = c.ring.preference_list(key_token(KS, key), 3)
    c.model.set_delay("A", 1.5)
    result = put(c, "B", key, b'"slow"')
    assert isinstance(result, PutResult) and result.coordinator == home[1], result
    first = c.call(home[1], GetRequest(c.new_rid(), KS, key, "ONE"))
    assert isinstance(first, GetResult) and isinstance(first.record, Versioned)
    assert [s.dot for s in first.record.siblings] == [("B~x", 1)]  # the fallback's copy only
    context = context_of(first.record.siblings)
    later = c.call(home[1], PutRequest(c.new_rid(), KS, key, b'"later"', JSON, context, "ONE"))
    assert isinstance(later, PutResult), later
    c.model.set_delay("A", 0.0)
    c.run_for(5.0)
    for node in home:
        assert [v for v, _ in live_values(c, node, key)] == [b'"later"'], node


def test_exact_dots_arriving_out_of_order_are_never_claimed_unseen() -> None:
    """B forwards two puts of one key: B~x:1 to a coordinator that is slow, B~x:2 (after B has
    learned to go around it) to another. A read that meets 2 before 1 must not claim 1 (a context
    `B~x: 2` would: its next write would delete a put nobody read, the lost write `bhandar chaos
    --seed 3 --ops 3000 --faults all` found when a forwarder chose dots without a cloud)."""
    c = SimCluster(seed=23, nodes=5, zones=5)
    key = a_key(c, KS, "A", "B")
    home = c.ring.preference_list(key_token(KS, key), 3)
    c.model.set_delay("A", 1.5)
    assert isinstance(put(c, "B", key, b'"one"', "ONE"), PutResult)
    read = c.call(home[1], GetRequest(c.new_rid(), KS, key, "ONE"))
    assert isinstance(read, GetResult) and isinstance(read.record, Versioned)
    context = context_of(read.record.siblings)
    assert context == {"B~x": 1}
    # A second put of the key, blind, coordinated by home[1] while A still holds the first one.
    second = c.call("B", PutRequest(c.new_rid(), KS, key, b'"two"', JSON, None, "ONE", avoid=("A",)))
    assert isinstance(second, PutResult), second
    got = c.call(home[1], GetRequest(c.new_rid(), KS, key, "ONE"))
    assert isinstance(got, GetResult) and isinstance(got.record, Versioned)
    seen = context_of(got.record.siblings)
    assert seen == {"B~x": 2}  # 1 and 2 both seen: folded into the prefix
    # Only 2, from a replica that never got 1: the context names 2 alone, not 1.
    only_two = context_of([s for s in got.record.siblings if s.dot == ("B~x", 2)])
    assert only_two == {"B~x:2": 2}
    c.model.set_delay("A", 0.0)
    c.run_for(5.0)
    later = c.call(home[1], PutRequest(c.new_rid(), KS, key, b'"three"', JSON, only_two, "ALL"))
    assert isinstance(later, PutResult), later
    c.run_for(5.0)
    for node in home:
        assert sorted(v for v, _ in live_values(c, node, key) if v) == [b'"one"', b'"three"'], node


def test_a_forwarded_put_no_coordinator_took_leaves_a_void_and_no_gap() -> None:
    """The only coordinator refuses the put without storing it (here: its context claims more of
    A's own dots than A ever issued). Its exact dot is stored as a void, so the next dot of the key
    folds into the prefix and no gap is left in anybody's context."""
    c = SimCluster(seed=25, nodes=5, zones=5)
    key = a_key(c, KS, "A", "B")
    bad = c.call("B", PutRequest(c.new_rid(), KS, key, b'"no"', JSON, {"A": 10**6}))
    assert isinstance(bad, Failure) and bad.code == "bad_input", bad
    assert metrics(c, "B").exact_dots_voided == 1
    c.run_for(2.0)  # the void goes to a home replica as a hint
    assert isinstance(put(c, "B", key, b'"yes"'), PutResult)
    c.run_for(2.0)
    read = c.call("A", GetRequest(c.new_rid(), KS, key, "ALL"))
    assert isinstance(read, GetResult) and isinstance(read.record, Versioned)
    assert [s.value for s in read.record.siblings if not s.void] == [b'"yes"']
    assert context_of(read.record.siblings) == {"B~x": 2}


def test_a_forwarded_put_whose_coordinators_went_silent_is_left_as_a_hint_and_applied() -> None:
    """Every coordinator B can try is cut off: the outcome is unknown (a silent one may have
    applied it), so B keeps the put as a hint, and it takes effect once the partition heals."""
    c = SimCluster(seed=26, nodes=5, zones=5)
    # A strict keyspace: no fallback may stand in, so B can only try the home replicas.
    made = c.call("A", KeyspaceRequest(c.new_rid(), KeyspaceDef("ledger", quorum="strict")))
    assert not isinstance(made, Failure), made
    c.run_for(0.5)
    key = a_key(c, "ledger", "A", "B")
    home = c.ring.preference_list(key_token("ledger", key), 3)
    c.model.partition([home, [n for n in c.ring.nodes if n not in home]], c.ring.nodes)
    result = c.call("B", PutRequest(c.new_rid(), "ledger", key, b'"maybe"', JSON, None))
    assert isinstance(result, Failure) and result.code == "timeout", result
    assert metrics(c, "B").exact_dots_left_as_hints == 1
    c.net.release(c.model.heal())
    c.run_for(10.0)
    held = c.hosts[home[0]].store.get("ledger", key)  # B's hint went to the first home replica
    assert isinstance(held, Versioned) and [s.dot for s in held.siblings] == [("B~x", 1)]
    read = c.call("C", GetRequest(c.new_rid(), "ledger", key, "ALL"))
    assert isinstance(read, GetResult) and isinstance(read.record, Versioned)
    assert [(s.value, s.dot) for s in read.record.siblings] == [(b'"maybe"', ("B~x", 1))]


def test_a_key_written_over_through_every_forwarder_keeps_one_context_entry_per_actor() -> None:
    """Contexts stay bounded without pruning: a key read and written over 60 times through each
    of the nodes that are not its replicas ends with one entry per actor that wrote it."""
    c = SimCluster(seed=27, nodes=5, zones=5)
    key = a_key(c, KS, "A", "B")
    home = c.ring.preference_list(key_token(KS, key), 3)
    outsiders = [n for n in c.ring.nodes if n not in home]
    context: dict[str, int] | None = None
    for i in range(60):
        via = outsiders[i % len(outsiders)]
        result = c.call(via, PutRequest(c.new_rid(), KS, key, str(i).encode(), JSON, context, "QUORUM"))
        assert isinstance(result, PutResult), result
        read = c.call(home[i % 3], GetRequest(c.new_rid(), KS, key, "QUORUM"))
        assert isinstance(read, GetResult) and isinstance(read.record, Versioned)
        context = context_of(read.record.siblings)
    assert context == {exact_actor(n): 60 // len(outsiders) for n in outsiders}


def test_a_put_refused_by_the_fallback_after_the_first_coordinator_was_slow_is_an_unknown_outcome() -> None:
    """`bhandar chaos --seed 3742943869 --ops 2000`: a delete went to a coordinator that took it
    but answered too late; the fallback refused it at once (unavailable) and the client heard a
    failure that promises the write was not applied, while the first coordinator had applied it.
    Here the fallback refuses a context that claims more of its own actor than it issued (only it
    can tell; A takes the put): after a fallback, a failure says the outcome is unknown."""
    c = SimCluster(seed=23, nodes=5, zones=5)
    key = a_key(c, KS, "A", "B")
    fallback = c.ring.preference_list(key_token(KS, key), 3)[1]
    c.model.set_delay("A", 1.5)  # A takes the put, and answers after B's timeout
    req = PutRequest(c.new_rid(), KS, key, b'"v"', JSON, {fallback: 10**6}, trace=True)
    result = c.call("B", req)
    assert isinstance(result, Failure), result
    steps = [text for _, text in result.trace]
    assert steps[:4] == [
        "B forwards to A as B~x:1",
        steps[1],
        "B falls back: a coordinator other than A",
        f"B forwards to {fallback} as B~x:1",
    ]
    assert result.code == "timeout", result
    assert (
        "the outcome is unknown (the put may have been applied there); then: context from the future"
        in result.error
    )
    c.model.set_delay("A", 0.0)
    c.run_for(5.0)
    assert [v for v, _ in live_values(c, "A", key)] == [b'"v"']  # it was applied
