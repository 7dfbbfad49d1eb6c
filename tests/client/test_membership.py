"""The membership as the nodes hold it (bhandar_cli/client/membership.py): the nodes' tables merged
as gossip merges them, the ring they route by, what they disagree on; and what the one vocabulary
(cluster_health.py) then says of a member the cluster file does not know, one the nodes say has
left while it is down, and a member that is down."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from bhandar_cli.client.cluster_health import NodeFacts, member_status, summarise
from bhandar_cli.client.membership import merge_tables, state_of_row
from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.membership.ring import node_tokens
from bhandar_cli.repl.batch import open_session


def plain(name: str, status: str = "normal", heartbeat: int = 5, generation: int = 1) -> dict[str, Any]:
    """A row of a node's `members` view asked with placement, as the RPC carries it."""
    return {
        "id": name,
        "zone": "z1" if name in "ACE" else "z2",
        "status": status,
        "generation": generation,
        "heartbeat": heartbeat,
        "tokens": 8,
        "token_positions": node_tokens(name, 8),
        "address": f"127.0.0.{ord(name) - 63}:7000",
        "http": f"127.0.0.{ord(name) - 63}:8443",
        "phi": 0.0,  # what else the view says is left out of a member's state
    }


def row(name: str, status: str = "normal", heartbeat: int = 5, generation: int = 1) -> MemberState:
    return state_of_row(plain(name, status, heartbeat, generation))


def test_the_freshest_state_of_each_member_wins_and_the_ring_holds_the_owning_ones() -> None:
    tables = {
        "A": [row("A"), row("B"), row("E", "joining", heartbeat=3)],
        "B": [row("A"), row("B"), row("E", "normal", heartbeat=9)],  # B has heard E is done
        "C": [row("A", heartbeat=2), row("B"), row("C"), row("D", "left")],
    }
    merged = merge_tables(tables)
    assert merged.answered == ["A", "B", "C"]
    assert {m: s.status for m, s in merged.members.items()} == {
        "A": "normal",
        "B": "normal",
        "C": "normal",
        "D": "left",
        "E": "normal",
    }
    assert merged.members["E"].address == "127.0.0.6:7000" and merged.members["E"].http == "127.0.0.6:8443"
    assert merged.in_service() == ["A", "B", "C", "E"]
    ring = merged.ring()
    assert ring is not None and sorted(ring.nodes) == ["A", "B", "C", "E"]  # the left one owns nothing
    assert abs(sum(ring.ownership.values()) - 1.0) < 1e-9
    assert ring.tokens_by_node()["E"] == sorted(node_tokens("E", 8))


def test_what_the_nodes_disagree_on_is_said_per_member() -> None:
    tables = {
        "A": [row("A"), row("E", "normal")],
        "B": [row("A"), row("E", "normal")],
        "C": [row("A"), row("E", "joining", heartbeat=1)],
        "D": [row("A")],  # has not heard of E at all
    }
    merged = merge_tables(tables)
    assert merged.disagreements() == ["E: joining to C; normal to A, B; not known to D"]
    agreed = merge_tables({"A": [row("A"), row("E")], "B": [row("A"), row("E")]})
    assert agreed.disagreements() == []
    health = summarise(
        [{"id": n, "up": True, "status": "normal", "sees_down": []} for n in "ABCDE"],
        (),
        merged.disagreements(),
    )
    assert health.line() == "5/5 running · nodes disagree on E"
    assert health.to_json()["disagree"] == ["E: joining to C; normal to A, B; not known to D"]


def test_a_node_of_an_earlier_version_sends_a_token_count_and_the_scheme_gives_the_positions() -> None:
    old = {k: v for k, v in plain("B").items() if k not in ("token_positions", "http")}
    merged = merge_tables({"A": [row("A"), state_of_row(old)]})
    assert merged.members["B"].tokens == tuple(node_tokens("B", 8)) and merged.members["B"].http == ""


def test_a_member_that_left_while_down_is_left_and_one_that_is_down_is_down() -> None:
    merged = merge_tables({"A": [row("A"), row("B"), row("C", "left"), row("D")]})
    # C left the ring and its process was stopped: the nodes say left, so it is left, not down.
    assert member_status("C", False, {}, merged) == "left"
    # D is down: still a member, with the status the nodes know.
    assert member_status("D", False, {}, merged) == "normal"
    # A running node says its own status.
    assert member_status("A", True, {"status": "leaving"}, merged) == "leaving"
    nodes: list[NodeFacts] = [
        {"id": n, "up": up, "status": member_status(n, up, {}, merged), "sees_down": []}
        for n, up in (("A", True), ("B", True), ("C", False), ("D", False))
    ]
    health = summarise(nodes)
    assert [n.state for n in health.nodes] == ["up", "up", "left", "down"]
    assert health.line() == "2/3 running · down D · left C"


def test_every_face_of_an_in_process_cluster_takes_the_same_membership() -> None:
    """A killed node stays listed, down; the status view says whose tables it is from."""

    async def main() -> list[dict[str, Any]]:
        async with open_session(ClusterOptions(nodes=4, memory=True), "json") as session:
            out = []
            for line in ("kill C", "sleep 5s", "status", "ring"):
                (reply,) = await session.run_line(line)
                out.append(reply.to_json())
            return out

    _, _, status, ring = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    states = {n["id"]: n["state"] for n in status["nodes"]}
    assert states == {"A": "up", "B": "up", "C": "down", "D": "up"}
    assert status["membership"] == {"from": ["A", "B", "D"], "disagree": []}
    assert sorted(ring["ownership"]) == ["A", "B", "C", "D"]  # down changes no ownership
