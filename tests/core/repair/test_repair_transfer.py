"""Repair moves differing keys in bounded batches, several in flight, whichever side holds them."""

from __future__ import annotations

from random import Random

import pytest

from bhandar_cli.core.membership.ring import Ring
from bhandar_cli.core.model.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.core.node import Node
from bhandar_cli.core.protocol.messages import KeyspaceRequest, RepairRequest, RepairResult, Send
from bhandar_cli.core.repair.antientropy import (
    BACKGROUND_TRANSFERS,
    RepairFetch,
    RepairFetchReply,
    RepairPush,
)
from bhandar_cli.core.repair.repair_transfer import BATCH_BYTES, FETCH_KEYS, WINDOW, KeyTransfer, record_bytes
from tests.core.test_node import Wire

KEYS = 700
VALUE = b"x" * 2000  # FETCH_KEYS of these are over BATCH_BYTES: replies and pushes must be cut


def two_nodes(holder: str) -> tuple[Wire, dict[str, MemoryStore]]:
    """A and B replicate everything; `holder` alone holds KEYS records of keyspace ks."""
    ring = Ring.build(["A", "B"], 4)
    stores = {"A": MemoryStore(), "B": MemoryStore()}
    for i in range(KEYS):
        stores[holder].put("ks", f"k{i}", Versioned((Sibling(("A", i + 1), {}, VALUE, "", 1.0),)))
    config = NodeConfig(liveness="ping", repair_interval=0, default_n=2)
    nodes = {n: Node(n, ring, stores[n], Random(i), 0.0, config) for i, n in enumerate("AB")}
    wire = Wire(nodes)
    wire.run("A", nodes["A"].request(0.0, KeyspaceRequest(0, KeyspaceDef("ks"))))
    wire.answers["A"].clear()
    wire.sent.clear()
    return wire, stores


def largest_in_flight(sent: list[tuple[str, Send]], initiator: str) -> int:
    """The most fetches one session of the initiator had sent and not yet seen answered."""
    out: dict[int, int] = {}
    most = 0
    for origin, send in sent:
        msg = send.msg
        if isinstance(msg, RepairFetch) and origin == initiator:
            out[msg.session] = out.get(msg.session, 0) + 1
            most = max(most, out[msg.session])
        elif isinstance(msg, RepairFetchReply) and send.dst == initiator:
            out[msg.session] -= 1
    return most


@pytest.mark.parametrize("holder", ["A", "B"])
def test_a_repair_of_many_keys_moves_them_in_bounded_batches(holder: str) -> None:
    wire, stores = two_nodes(holder)
    wire.run("A", wire.nodes["A"].request(0.0, RepairRequest(1)))
    [result] = wire.answers["A"]
    assert isinstance(result, RepairResult) and not result.failed
    assert result.keys == KEYS
    assert dict(stores["A"].items("ks")) == dict(stores["B"].items("ks"))
    messages = [send.msg for _, send in wire.sent]
    fetches = [m for m in messages if isinstance(m, RepairFetch)]
    replies = [m for m in messages if isinstance(m, RepairFetchReply)]
    pushes = [m for m in messages if isinstance(m, RepairPush)]
    assert all(len(f.keys) <= FETCH_KEYS for f in fetches)
    assert len(fetches) == len(replies) > KEYS // FETCH_KEYS  # more than one batch
    assert 1 < largest_in_flight(wire.sent, "A") <= WINDOW
    # No reply or push carries much more than BATCH_BYTES (one record may go over alone).
    for batch in [r.records for r in replies] + [p.records for p in pushes]:
        assert len(batch) == 1 or sum(record_bytes(rec) for _, rec in batch) <= BATCH_BYTES
    if holder == "B":  # A fetched the records: B left some keys for later fetches
        assert any(r.more for r in replies)
        assert not pushes
    else:  # A pushed them: in several pushes
        assert len(pushes) > KEYS // FETCH_KEYS


def test_answers_are_matched_by_number_and_a_repeated_one_is_ignored() -> None:
    transfer = KeyTransfer()
    transfer.waiting.extend(f"k{i}" for i in range(FETCH_KEYS * WINDOW + 1))
    batches = transfer.next_fetches()
    assert len(batches) == WINDOW and all(len(keys) == FETCH_KEYS for _, keys in batches)
    assert transfer.next_fetches() == []  # the window is full
    first = batches[0][0]
    assert transfer.fetched(first, ("k0",))
    assert not transfer.fetched(first, ())  # a duplicate
    assert not transfer.fetched(999, ())  # never sent
    push = transfer.push()
    late = transfer.next_fetches()  # the key left out goes again, after those never asked for
    assert [keys for _, keys in late] == [(f"k{FETCH_KEYS * WINDOW}", "k0")]
    for number, _ in [*batches[1:], *late]:
        assert transfer.fetched(number, ())
    assert not transfer.done  # a push is still unacknowledged
    assert transfer.pushed(push) and not transfer.pushed(push)
    assert transfer.done


def test_background_repair_transfers_records_in_a_few_sessions_at_a_time() -> None:
    """A's turn with B compares every range they share at once and finds them all differing; only
    BACKGROUND_TRANSFERS of those sessions fetch and push at a time, the others wait for a slot,
    so background repair keeps a bound on the records in flight; and all of them finish."""
    ring = Ring.build(["A", "B"], 16)
    stores = {"A": MemoryStore(), "B": MemoryStore()}
    for i in range(KEYS):
        stores["B"].put("ks", f"k{i}", Versioned((Sibling(("B", i + 1), {}, b"1", "", 1.0),)))
    config = NodeConfig(liveness="ping", repair_interval=2.0, default_n=2)
    nodes = {n: Node(n, ring, stores[n], Random(i), 0.0, config) for i, n in enumerate("AB")}
    wire = Wire(nodes)
    wire.run("A", nodes["A"].request(0.0, KeyspaceRequest(0, KeyspaceDef("ks"))))
    wire.sent.clear()
    for now in range(1, 5):  # (B is up once a ping said so; A's first turn comes within 3 s)
        wire.now = float(now)
        wire.tick("A")  # everything is delivered at once: every session reaches its transfer together
    fetching: dict[int, int] = {}
    most = 0
    for origin, send in wire.sent:
        msg = send.msg
        if isinstance(msg, RepairFetch) and origin == "A":
            fetching[msg.session] = fetching.get(msg.session, 0) + 1
        elif isinstance(msg, RepairFetchReply) and send.dst == "A":
            fetching[msg.session] -= 1
        most = max(most, sum(1 for n in fetching.values() if n > 0))
    assert len(fetching) > BACKGROUND_TRANSFERS  # more sessions transferred than the bound...
    assert most == BACKGROUND_TRANSFERS  # ...but never more than it at once
    assert dict(stores["A"].items("ks")) == dict(stores["B"].items("ks"))
