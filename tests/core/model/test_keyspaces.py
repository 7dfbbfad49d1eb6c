"""Keyspaces are created, never conjured: the built-in ones, names, the bound, the unknown-keyspace
error, and how definitions travel (schema broadcast, gossip, the messages replicas receive)."""

from __future__ import annotations

import pytest

from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.model.errors import BadInput, KeyspaceConflict, UnknownKeyspace
from bhandar_cli.core.model.keyspaces import MAX_KEYSPACES, Keyspaces
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.model.versions import JSON, Sibling
from bhandar_cli.core.protocol.client_messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    PutRequest,
    PutResult,
)
from bhandar_cli.core.protocol.messages import KeyspaceRequest, KeyspaceResult, ReplicaAck, ReplicaWrite, Send
from bhandar_cli.sim.sim_cluster import SimCluster

BAD_NAMES = [".", "..", "A", "Kv", "a" * 65, "a/b", "", "a.b", "a b", "é"]


def test_kv_and_counters_exist_from_the_start_and_created_ones_survive_a_restart() -> None:
    store = MemoryStore()
    keyspaces = Keyspaces(store, default_n=2)
    assert [(k.name, k.policy, k.n) for k in keyspaces.all()] == [
        ("kv", "siblings", 2),
        ("counters", "counter", 2),
    ]
    strict = KeyspaceDef("orders", quorum="strict", n=3)
    assert keyspaces.create(strict) is True
    again = Keyspaces(store, default_n=2)
    assert again["orders"] == strict and again.all() == keyspaces.all()
    assert again.widest() == 3
    assert again.policy("orders") == "siblings" and again.policy("never-heard") == "siblings"
    view = keyspaces.view()
    with pytest.raises(TypeError):
        view["x"] = strict  # type: ignore[index]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_name_is_refused(name: str) -> None:
    with pytest.raises(BadInput, match="1 to 64 characters of a-z, 0-9, _ and -"):
        KeyspaceDef(name)


def test_good_names() -> None:
    for name in ("a", "a" * 64, "orders_2024", "x-y", "0"):
        assert KeyspaceDef(name).name == name


def test_an_unknown_keyspace_names_those_that_exist_and_the_closest() -> None:
    keyspaces = Keyspaces(MemoryStore(), default_n=3)
    keyspaces.create(KeyspaceDef("orders"))
    with pytest.raises(UnknownKeyspace) as caught:
        keyspaces.require("ordres")
    message = str(caught.value)
    assert isinstance(caught.value, BadInput) and caught.value.code == "unknown_keyspace"
    assert "'ordres'" in message and "did you mean orders?" in message
    assert "counters, kv, orders" in message and "\n" not in message
    with pytest.raises(UnknownKeyspace, match="did you mean kv\\?"):
        keyspaces.require("KV")  # not a valid name either: said so, and the closest still found
    with pytest.raises(UnknownKeyspace) as far:
        keyspaces.require("zzzzzz")
    assert "did you mean" not in str(far.value)
    assert [k.name for k in keyspaces.all()] == ["kv", "counters", "orders"]


def test_create_is_idempotent_and_a_different_definition_conflicts() -> None:
    keyspaces = Keyspaces(MemoryStore(), default_n=3)
    prices = KeyspaceDef("prices", policy="lww")
    assert keyspaces.create(prices) is True
    assert keyspaces.create(KeyspaceDef("prices", policy="lww")) is False
    with pytest.raises(KeyspaceConflict, match="already exists with policy=lww n=3 quorum=sloppy"):
        keyspaces.create(KeyspaceDef("prices"))
    with pytest.raises(KeyspaceConflict):
        keyspaces.create(KeyspaceDef("kv", policy="lww"))
    assert keyspaces["prices"] == prices


def test_the_number_of_keyspaces_is_bounded_where_they_are_created() -> None:
    store = MemoryStore()
    keyspaces = Keyspaces(store, default_n=3)
    for i in range(MAX_KEYSPACES - 2):  # kv and counters count too
        keyspaces.create(KeyspaceDef(f"k{i}"))
    assert len(keyspaces.all()) == MAX_KEYSPACES
    with pytest.raises(BadInput, match=f"has {MAX_KEYSPACES} keyspaces, the most it allows"):
        keyspaces.create(KeyspaceDef("one-more"))
    assert keyspaces.create(KeyspaceDef("k0")) is False  # an identical one is still fine
    # A peer's definition is learned even past the bound: a replica never refuses data.
    keyspaces.learn(KeyspaceDef("made-elsewhere"))
    assert keyspaces.get("made-elsewhere") is not None


def test_definitions_made_apart_converge_whichever_order_they_arrive_in() -> None:
    lww, strict = KeyspaceDef("prices", policy="lww"), KeyspaceDef("prices", quorum="strict")
    first, second = Keyspaces(MemoryStore(), 3), Keyspaces(MemoryStore(), 3)
    first.learn_all([lww, strict])
    second.learn_all([strict, lww])
    assert first["prices"] == second["prices"]


# --- through the nodes -------------------------------------------------------------------------


def _fails_unknown(result: object) -> str:
    assert isinstance(result, Failure) and result.code == "unknown_keyspace", result
    return result.error


def test_get_put_incr_delete_on_an_unknown_keyspace_fail_and_create_nothing() -> None:
    c = SimCluster(seed=3, nodes=3)
    before = {n: (h.node.keyspaces.copy(), h.store.get_meta("keyspaces")) for n, h in c.hosts.items()}  # type: ignore[union-attr]
    requests: list[GetRequest | PutRequest | IncrRequest] = [
        GetRequest(c.new_rid(), "kvv", "k"),
        PutRequest(c.new_rid(), "kvv", "k", b"1", JSON, None),
        PutRequest(c.new_rid(), "kvv", "k", None, "", None),
        IncrRequest(c.new_rid(), "counter", "k", 1, "r1"),
        GetRequest(c.new_rid(), "..", "k"),
    ]
    errors = [_fails_unknown(c.call("A", r)) for r in requests]
    assert "did you mean kv?" in errors[0] and "Keyspaces: counters, kv." in errors[0]
    assert "did you mean counters?" in errors[3]
    # 2,000 gets on misspelled names: still nothing created, nothing persisted, nothing sent.
    for i in range(2000):
        _fails_unknown(c.call("ABC"[i % 3], GetRequest(c.new_rid(), f"kv{i}", "k")))
    c.run_for(2.0)
    after = {n: (h.node.keyspaces.copy(), h.store.get_meta("keyspaces")) for n, h in c.hosts.items()}  # type: ignore[union-attr]
    assert after == before
    assert all(set(ks) == {"kv", "counters"} for ks, _ in after.values())


def test_a_created_keyspace_reaches_every_node_and_is_then_usable_through_any() -> None:
    c = SimCluster(seed=5, nodes=4)
    orders = KeyspaceDef("orders", policy="lww", n=2)
    created = c.call("B", KeyspaceRequest(c.new_rid(), orders))
    assert created == KeyspaceResult(orders, True)
    assert c.call("C", KeyspaceRequest(c.new_rid(), orders)) == KeyspaceResult(orders, False)
    conflict = c.call("D", KeyspaceRequest(c.new_rid(), KeyspaceDef("orders")))
    assert isinstance(conflict, Failure) and conflict.code == "conflict", conflict
    c.run_for(1.0)
    for name, host in c.hosts.items():
        assert host.node is not None and host.node.keyspaces["orders"] == orders, name
    assert isinstance(c.call("D", PutRequest(c.new_rid(), "orders", "o1", b"1", JSON, None)), PutResult)
    got = c.call("A", GetRequest(c.new_rid(), "orders", "o1"))
    assert isinstance(got, GetResult) and got.record is not None


def test_gossip_brings_a_keyspace_to_a_node_that_missed_the_broadcast() -> None:
    c = SimCluster(seed=6, nodes=3)
    c.model.partition([["C"]], list(c.hosts))
    assert isinstance(c.call("A", KeyspaceRequest(c.new_rid(), KeyspaceDef("late"))), KeyspaceResult)
    # A coordinator that has not heard of it yet says it is unknown (a client retries) ...
    _fails_unknown(c.call("C", GetRequest(c.new_rid(), "late", "k", "ONE")))
    c.net.heal()
    c.run_for(5.0)
    # ... and knows it once gossip has carried the schema.
    assert c.hosts["C"].node is not None and c.hosts["C"].node.keyspaces["late"] == KeyspaceDef("late")


def test_a_replica_keeps_a_write_for_a_keyspace_it_has_not_heard_of() -> None:
    c = SimCluster(seed=7, nodes=3)
    node = c.hosts["B"].node
    assert node is not None
    fresh = KeyspaceDef("fresh", policy="lww")
    record = Versioned((Sibling(("A", 1), {}, b"1", JSON, 1.0),))
    out = node.handle(c.now, "A", ReplicaWrite(9, fresh, "k", record))
    assert Send("A", ReplicaAck(9), durable=True) in out
    assert node.keyspaces["fresh"] == fresh and c.hosts["B"].store.get("fresh", "k") == record
