"""A gossip ack carries only the states its syn's sender lacks or holds older: the rest the sender
would merge and drop, so leaving them out changes no merge and saves most of an ack's bytes."""

from __future__ import annotations

from random import Random

from bhandar_cli.core.membership.gossip import GossipAck, GossipLiveness, GossipSyn
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.protocol.messages import Send


def state(node: str, heartbeat: int, generation: int = 1) -> MemberState:
    return MemberState(node, "z1", (ord(node[0]),), generation=generation, heartbeat=heartbeat)


def test_the_ack_holds_what_the_syn_lacked_or_held_older_and_nothing_else() -> None:
    b = GossipLiveness(state("B", 9), [state("A", 5), state("C", 7), state("E", 3)], [], 0.0, Random(2))
    # A's whole table: B and C older than B's view, D unknown to B, A itself newer, E the same.
    syn = GossipSyn((state("A", 6), state("B", 4), state("C", 2, generation=2), state("D", 1), state("E", 3)))
    (reply,) = [e for e in b.handle(1.0, "A", syn) or [] if isinstance(e, Send)]
    assert isinstance(reply.msg, GossipAck)
    # B's own state (9 beats 4) goes back; C does not: generation 2 beats B's generation 1, so B
    # took the syn's. A's and D's are the syn's own, E's is the same: none of them is news to A.
    assert [(s.id, s.version) for s in reply.msg.members] == [("B", (1, 9))]


def test_after_a_syn_and_its_ack_both_tables_agree() -> None:
    a = GossipLiveness(state("A", 4), [state("B", 1), state("C", 8)], [], 0.0, Random(1))
    b = GossipLiveness(state("B", 6), [state("A", 2), state("C", 3), state("D", 5)], [], 0.0, Random(2))
    syn = GossipSyn(a.digest())
    (reply,) = [e for e in b.handle(1.0, "A", syn) or [] if isinstance(e, Send)]
    assert isinstance(reply.msg, GossipAck)
    assert {s.id for s in reply.msg.members} == {"B", "D"}
    a.handle(1.1, "B", reply.msg)
    tables = [{s.id: s.version for s in node.digest()} for node in (a, b)]
    assert tables[0] == tables[1] == {"A": (1, 4), "B": (1, 6), "C": (1, 8), "D": (1, 5)}
