"""Forwarding falls back, through the deterministic simulator: a forwarded put whose coordinator
does not answer in time goes to the next live replica (or is coordinated by the forwarder) while a
quorum is reachable; a forwarded increment never does, since it could count twice."""

from __future__ import annotations

from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.metrics import NodeMetrics
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import JSON, context_of
from bhandar_cli.core.protocol.messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
)
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
    assert steps[0] == "B forwards to A"
    assert steps[1].startswith("A did not answer within")
    assert steps[2] == "B falls back: a coordinator other than A"
    assert steps[3] == f"B forwards to {home[1]}"
    assert steps[4].startswith(f"{home[1]} coordinates put {KS}/{key}")
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
        f"{forwarder} forwards to A",
        steps[1],
        f"{forwarder} falls back: a coordinator other than A",
    ]
    assert steps[3].startswith(f"{forwarder} coordinates put")


def test_a_put_whose_first_coordinator_was_only_slow_is_stored_twice_under_two_dots() -> None:
    """The fallback may double-apply a put: the value is then two siblings with distinct dots
    (never one dot for two writes), and the next write with their context replaces both."""
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
    siblings = read.record.siblings
    assert [s.value for s in siblings] == [b'"slow"', b'"slow"']
    assert len({s.dot for s in siblings}) == 2 and {s.dot[0] for s in siblings} == {"A", home[1]}


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


def test_a_write_that_read_one_copy_of_a_put_stored_twice_leaves_the_other_beside_it() -> None:
    """What the double-apply costs, as `bhandar check -w dynamo-kv` sees it from the clients: a
    write made with the context of a read that met only the fallback's copy replaces that copy,
    and the slow coordinator's copy, arriving later, is not covered by it: the older value comes
    back as a sibling of a write that had read it (the checker's "false sibling"). Recorded here as
    the design does it today; docs/versions-and-siblings.md says so and what would close it."""
    c = SimCluster(seed=23, nodes=5, zones=5)
    key = a_key(c, KS, "A", "B")
    home = c.ring.preference_list(key_token(KS, key), 3)
    c.model.set_delay("A", 1.5)
    result = put(c, "B", key, b'"slow"')
    assert isinstance(result, PutResult) and result.coordinator == home[1], result
    first = c.call(home[1], GetRequest(c.new_rid(), KS, key, "ONE"))
    assert isinstance(first, GetResult) and isinstance(first.record, Versioned)
    assert [s.dot[0] for s in first.record.siblings] == [home[1]]  # the fallback's copy only
    context = context_of(first.record.siblings)
    later = c.call(home[1], PutRequest(c.new_rid(), KS, key, b'"later"', JSON, context, "ONE"))
    assert isinstance(later, PutResult), later
    c.model.set_delay("A", 0.0)
    c.run_for(5.0)
    read = c.call(home[1], GetRequest(c.new_rid(), KS, key, "ALL"))
    assert isinstance(read, GetResult) and isinstance(read.record, Versioned)
    assert sorted(s.value or b"" for s in read.record.siblings) == [b'"later"', b'"slow"']
    assert {s.dot[0] for s in read.record.siblings if s.value == b'"slow"'} == {"A"}


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
        "B forwards to A",
        steps[1],
        "B falls back: a coordinator other than A",
        f"B forwards to {fallback}",
    ]
    assert result.code == "timeout", result
    assert (
        "the outcome is unknown (the put may have been applied there); then: context from the future"
        in result.error
    )
    c.model.set_delay("A", 0.0)
    c.run_for(5.0)
    assert [v for v, _ in live_values(c, "A", key)] == [b'"v"']  # it was applied
