"""What a get sends, by consistency level: a read at ONE through a replica asks no one else.

Driven by hand through test_node's `Wire`, which records every `Send`, so each test sees exactly
which replicas a read asked and which it repaired.
"""

from __future__ import annotations

from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.protocol.client_messages import GetRequest, GetResult, PutResult
from bhandar_cli.core.protocol.messages import ReplicaRead, ReplicaWrite
from tests.core.test_node import Wire, cluster, key_where, put


def reads_sent(wire: Wire) -> list[tuple[str, str]]:
    return [(origin, send.dst) for origin, send in wire.sent if isinstance(send.msg, ReplicaRead)]


def repairs_sent(wire: Wire) -> list[str]:
    return [
        send.dst for _, send in wire.sent if isinstance(send.msg, ReplicaWrite) and send.msg.kind == "repair"
    ]


def stale_third_replica() -> tuple[Wire, str, tuple[str, ...]]:
    """A 5-node cluster and a key of three home replicas (E not among them), written through the
    first while the third was cut off: the third missed the write."""
    wire, ring = cluster()
    key = key_where(ring, lambda prefs: "E" not in prefs)
    home = ring.preference_list(key_token("ks", key), 3)
    wire.cut = {home[2]}
    wire.request(home[0], put(1, key, b"new"))
    assert isinstance(wire.answers[home[0]].pop(), PutResult)
    wire.cut = set()
    wire.sent.clear()
    return wire, key, home


def test_a_get_at_one_through_a_replica_reads_its_own_copy_and_sends_nothing() -> None:
    wire, key, home = stale_third_replica()
    laggard = home[2]

    wire.request(laggard, GetRequest(2, "ks", key, "ONE"))

    [result] = wire.answers[laggard]
    assert isinstance(result, GetResult) and result.record is None  # its own (stale) copy
    assert (result.replies, result.needed) == (1, 1)
    assert wire.sent == []  # no other replica asked, so none repaired either
    assert wire.nodes[laggard].metrics.read_repairs == 0
    own, _ = wire.nodes[laggard].records("ks", key)
    assert own is None  # anti-entropy (or a read at QUORUM) brings it up to date, not this read


def test_a_get_at_one_through_a_replica_returns_what_it_holds() -> None:
    wire, key, home = stale_third_replica()

    wire.request(home[1], GetRequest(2, "ks", key, "ONE"))

    [result] = wire.answers[home[1]]
    assert isinstance(result, GetResult) and isinstance(result.record, Versioned)
    assert [s.value for s in result.record.siblings] == [b"new"]
    assert wire.sent == []


def test_a_get_at_one_through_a_node_holding_no_copy_asks_every_replica_and_repairs() -> None:
    wire, key, home = stale_third_replica()

    wire.request("E", GetRequest(2, "ks", key, "ONE"))

    [result] = wire.answers["E"]
    assert isinstance(result, GetResult) and result.needed == 1
    assert sorted(dst for _, dst in reads_sent(wire)) == sorted(home)
    assert repairs_sent(wire) == [home[2]]


def test_a_get_at_quorum_through_a_replica_asks_the_others_and_repairs_the_stale_one() -> None:
    wire, key, home = stale_third_replica()

    wire.request(home[2], GetRequest(2, "ks", key, "QUORUM"))

    [result] = wire.answers[home[2]]
    assert isinstance(result, GetResult) and result.needed == 2
    assert sorted(reads_sent(wire)) == sorted((home[2], other) for other in home[:2])
    own, _ = wire.nodes[home[2]].records("ks", key)
    assert isinstance(own, Versioned) and [s.value for s in own.siblings] == [b"new"]  # repaired
    assert wire.nodes[home[2]].metrics.read_repairs == 1
