"""Client tokens in the core: records, roles, the table's merge (commutative, idempotent,
revocation wins) and its spread by gossip to every node, one that was down included."""

from __future__ import annotations

import itertools
from dataclasses import replace
from random import Random

import pytest

from bhandar_cli.core.membership.gossip import GossipAck, GossipLiveness, GossipSyn, GossipTokens
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.model.access_tokens import TokenRecord, TokenTable, check_record
from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.protocol.messages import Send
from bhandar_cli.core.wire import from_wire, to_wire
from bhandar_cli.sim.sim_cluster import SimCluster

DIGEST = "ab" * 32


def record(token_id: str, grants: dict[str, str], revoked: bool = False) -> TokenRecord:
    return check_record(TokenRecord(token_id, DIGEST, tuple(grants.items()), revoked=revoked))


def test_roles_are_ordered_and_a_star_grant_covers_every_keyspace() -> None:
    reader = record("a1a1a1a1", {"kv": "read"})
    writer = record("b2b2b2b2", {"kv": "write", "*": "read"})
    admin = record("c3c3c3c3", {"*": "admin"})
    assert reader.allows("kv", "read") and not reader.allows("kv", "write")
    assert not reader.allows("other", "read")
    assert writer.allows("kv", "read") and writer.allows("kv", "write")
    assert writer.allows("other", "read") and not writer.allows("other", "write")
    assert not writer.allows("*", "admin")
    assert admin.allows("anything", "write") and admin.allows("*", "admin")


@pytest.mark.parametrize(
    "bad",
    [
        {"id": "zz", "digest": DIGEST, "grants": {"kv": "read"}},
        {"id": "a1a1a1a1", "digest": "short", "grants": {"kv": "read"}},
        {"id": "a1a1a1a1", "digest": DIGEST, "grants": {"kv": "owner"}},
        {"id": "a1a1a1a1", "digest": DIGEST, "grants": {"no/such": "read"}},
        {"id": "a1a1a1a1", "digest": DIGEST, "grants": ["kv"]},
        {"id": "a1a1a1a1", "digest": DIGEST, "grants": {}, "rate": -1},
        {"id": "a1a1a1a1", "digest": DIGEST, "grants": {}, "rate": "fast"},
    ],
)
def test_a_malformed_record_is_refused_and_dropped_by_a_merge(bad: dict[str, object]) -> None:
    with pytest.raises(BadInput):
        check_record(bad)
    table = TokenTable(MemoryStore())
    assert table.merge([bad]) is False
    assert table.records() == () and table.version == 0


def test_the_merge_is_commutative_idempotent_and_revocation_wins() -> None:
    live = record("a1a1a1a1", {"kv": "write"})
    revoked = replace(live, revoked=True)
    other = record("b2b2b2b2", {"*": "admin"})
    batches = [[live], [revoked], [other], [live, other]]
    results = set()
    for order in itertools.permutations(batches):
        table = TokenTable(MemoryStore())
        for batch in order:
            table.merge(batch)
            table.merge(batch)  # twice: nothing changes
        results.add((table.records(), table.version))
    assert len(results) == 1
    ((records, _),) = results
    assert [r.id for r in records] == ["a1a1a1a1", "b2b2b2b2"]
    assert records[0].revoked


def test_the_table_outlives_its_object_in_the_store_with_its_revocations() -> None:
    store = MemoryStore()
    table = TokenTable(store)
    table.add(record("a1a1a1a1", {"kv": "read"}))
    table.revoke("a1a1a1a1")
    again = TokenTable(store)
    assert again.records() == table.records() and again.version == table.version
    got = again.get("a1a1a1a1")
    assert got is not None and got.revoked
    with pytest.raises(BadInput, match="exists already"):
        again.add(record("a1a1a1a1", {"kv": "read"}))
    with pytest.raises(BadInput, match="no token"):
        again.revoke("ffffffff")


def test_records_cross_the_wire_and_come_back_equal() -> None:
    rec = record("a1a1a1a1", {"kv": "write", "*": "read"})
    ack = GossipAck((), (), 7, (rec,))
    assert from_wire(to_wire(ack)) == ack


def gossip_pair() -> tuple[GossipLiveness, TokenTable, GossipLiveness, TokenTable]:
    a_table, b_table = TokenTable(MemoryStore()), TokenTable(MemoryStore())
    a = GossipLiveness(MemberState("A", "z1", (1,)), [], [], 0.0, Random(1), client_tokens=a_table)
    b = GossipLiveness(MemberState("B", "z1", (2,)), [], [], 0.0, Random(2), client_tokens=b_table)
    return a, a_table, b, b_table


def test_equal_tables_cost_one_number_per_message() -> None:
    a, a_table, b, b_table = gossip_pair()
    for table in (a_table, b_table):
        table.merge([record("a1a1a1a1", {"kv": "read"})])
    out = b.handle(1.0, "A", GossipSyn((), (), a_table.version))
    acks = [e.msg for e in out or [] if isinstance(e, Send)]
    assert len(acks) == 1 and isinstance(acks[0], GossipAck)
    assert acks[0].client_tokens == () and acks[0].client_tokens_version == b_table.version
    assert [e for e in a.handle(1.0, "B", acks[0]) or [] if isinstance(e, Send)] == []


def test_a_syn_ack_exchange_brings_both_tables_to_the_union() -> None:
    a, a_table, b, b_table = gossip_pair()
    a_table.add(record("a1a1a1a1", {"kv": "read"}))
    b_table.add(record("b2b2b2b2", {"kv": "write"}))
    ack = [e.msg for e in b.handle(1.0, "A", GossipSyn((), (), a_table.version)) or [] if isinstance(e, Send)]
    assert isinstance(ack[0], GossipAck) and ack[0].client_tokens  # versions differed: the table
    back = [e.msg for e in a.handle(1.0, "B", ack[0]) or [] if isinstance(e, Send)]
    assert len(back) == 1 and isinstance(back[0], GossipTokens)  # B lacked A's token
    b.handle(1.0, "A", back[0])
    assert a_table.records() == b_table.records() and len(a_table.records()) == 2


def tables(c: SimCluster) -> dict[str, TokenTable]:
    return {n: h.node.client_tokens for n, h in c.hosts.items() if h.node is not None}


def test_a_token_and_its_revocation_reach_every_node_one_that_was_down_included() -> None:
    c = SimCluster(seed=3, nodes=5)
    c.run_for(3)
    tables(c)["A"].add(record("a1a1a1a1", {"kv": "write"}))
    c.kill("D")
    c.run_for(3)
    assert all(t.get("a1a1a1a1") is not None for t in tables(c).values())
    tables(c)["B"].revoke("a1a1a1a1")
    c.run_for(3)
    c.revive("D")
    started = c.now
    while c.now < started + 10 and not all(
        (got := t.get("a1a1a1a1")) is not None and got.revoked for t in tables(c).values()
    ):
        c.run_for(0.25)
    assert c.now < started + 5, "the revocation took more than a few gossip rounds to reach D"
    assert {t.version for t in tables(c).values()} == {tables(c)["A"].version}
