"""The web view's state snapshot, built from the client's views on an in-process cluster (virtual
clock), and the sequence diagrams parsed from traces."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.web.sequence import request_view
from bhandar_cli.web.state import WebState


def snapshots(lines: list[str], nodes: int = 5) -> list[dict[str, Any]]:
    """The snapshot after each line, run in the session the web state observes."""

    async def main() -> list[dict[str, Any]]:
        async with open_session(ClusterOptions(nodes=nodes, memory=True), "json") as session:
            state = WebState(session)
            session.observers.append(state.observe)
            out = []
            for line in lines:
                await session.run_line(line)
                metrics = await session.client.views.metrics()
                snap = await state.snapshot(metrics)
                out.append(json.loads(json.dumps(snap)))  # it is JSON, and stays the same through it
            return out

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_five_nodes_their_zones_and_the_whole_ring() -> None:
    (snap,) = snapshots(["status"])
    cards = snap["nodes"]
    assert [c["id"] for c in cards] == list("ABCDE")
    assert [c["state"] for c in cards] == ["up"] * 5
    assert [c["zone"] for c in cards] == ["z1", "z2", "z3", "z1", "z2"]
    assert all(c["group"] is None and c["tokens"] == 8 for c in cards)
    arcs = snap["ring"]["arcs"]
    assert len(arcs) == 5 * 8 and {a["owner"] for a in arcs} == set("ABCDE")
    space = snap["ring"]["space"]
    assert sum((a["hi"] - a["lo"]) % space for a in arcs) == space  # the arcs cover the ring once
    assert all(a["zone"] == snap["ring"]["zones"][a["owner"]] for a in arcs)
    assert snap["requests"] == [] and snap["focus"] is None


def test_a_kill_a_partition_and_a_slow_node_show_on_the_cards_in_the_repls_words() -> None:
    killed, parted, later, healed, slow = snapshots(
        ["kill B", "revive B; partition A | B C", "sleep 10s", "heal; sleep 5s", "delay B 3000; sleep 3s"]
    )
    assert {c["id"]: c["state"] for c in killed["nodes"]} == {**dict.fromkeys("ACDE", "up"), "B": "down"}
    assert killed["health"]["line"] == "4/5 running · down B"
    assert parted["partitions"] == [["A"], ["B", "C"], ["D", "E"]]
    assert {c["id"]: c["group"] for c in parted["nodes"]} == {"A": 1, "B": 2, "C": 2, "D": 3, "E": 3}
    # Every node runs, cut off from the other groups: partitioned, not down nor suspected, though
    # the other groups' detectors believe it down.
    a = next(c for c in later["nodes"] if c["id"] == "A")
    assert a["state"] == "partitioned" and set(a["suspected_by"]) == set("BCDE")
    assert {c["state"] for c in later["nodes"]} == {"partitioned"}
    assert later["health"]["line"] == "5/5 running · partitioned {A} | {B, C} | {D, E}"
    assert (later["health"]["nodes"], later["health"]["running"]) == (5, 5)
    assert next(c for c in later["nodes"] if c["id"] == "A")["phi"] == 0.0  # A's own view of itself
    assert any(c["phi"] > 1 for c in later["nodes"] if c["id"] in "BCDE")  # as A sees them
    assert {c["state"] for c in healed["nodes"]} == {"up"} and healed["health"]["line"] == "5/5 running"
    # A slow node is believed down by peers that can reach it: suspected, and by whom.
    suspected = {c["id"]: c["suspected_by"] for c in slow["nodes"] if c["state"] == "suspected"}
    assert suspected and all(by for by in suspected.values()), slow["nodes"]
    assert all(f"{n} suspected by" in slow["health"]["line"] for n in suspected)


def test_a_traced_quorum_put_is_a_request_of_its_coordinator_and_replicas() -> None:
    snap = snapshots(["trace on; put kv cart:42 '[\"rice\"]' c=QUORUM; sleep 1s"])[0]
    (request,) = snap["requests"]
    focus = snap["focus"]
    assert (focus["keyspace"], focus["key"]) == ("kv", "cart:42")
    replicas = focus["replicas"]
    assert request["level"] == "QUORUM" and request["traced"]
    assert request["participants"][0] == "client"
    assert set(request["participants"][1:]) == {request["coordinator"], *replicas}
    msgs = [(e["from"], e["to"]) for e in request["events"] if e["kind"] == "msg"]
    assert msgs[0] == ("client", request["coordinator"]) and msgs[-1] == (request["coordinator"], "client")
    assert {(request["coordinator"], r) for r in replicas if r != request["coordinator"]} <= set(msgs)
    # Every replica holds the sibling with its dot.
    assert set(focus["holders"]) == set(replicas)
    for versions in focus["holders"].values():
        assert [v["value"] for v in versions] == [["rice"]] and versions[0]["dot"][0] == request[
            "coordinator"
        ]
    assert snap["latency"]["put QUORUM"]["count"] == 1 and sum(snap["latency"]["put QUORUM"]["bars"]) == 1


def test_a_get_gives_the_focus_its_context_and_untraced_requests_say_so() -> None:
    snap = snapshots(["put kv k 1; put kv k 2 ctx=none; get kv k; sleep 1s"])[0]
    assert [r["cmd"] for r in snap["requests"]] == ["get", "put", "put"]
    assert not any(r["traced"] for r in snap["requests"])
    assert snap["focus"]["context"]  # the get's context token
    (versions,) = {len(v) for v in snap["focus"]["holders"].values()}
    assert versions == 2  # two concurrent siblings
    assert snap["latency"]["get QUORUM"]["count"] == 1
    # The session's log: each command as typed and as the REPL printed it, newest first.
    assert [e["line"] for e in snap["log"]] == ["sleep 1s", "get kv k", "put kv k 2 ctx=none", "put kv k 1"]
    assert snap["log"][1]["ok"] and "context" in snap["log"][1]["text"]
    assert snap["log"][3]["text"].startswith("OK put kv/k")


def test_a_failed_write_is_drawn_with_its_failure() -> None:
    trace = [
        [0.0, "B coordinates put kv/a as B:1, needs 3"],
        [0.0, "sent to A"],
        [0.0, "sent to C"],
        [1.0, "ack from B"],
        [2.0, "ack from A"],
        [100.0, "failed: only 2 of 3 replicas answered"],
    ]
    reply = {"cmd": "put", "ok": False, "code": "unavailable", "error": "only 2", "trace": trace}
    view = request_view("put", {**reply, "keyspace": "kv", "key": "a"}, "ALL", ["B", "A", "C"])
    assert view["coordinator"] == "B" and view["participants"] == ["client", "B", "A", "C"]
    sent = {e["to"]: e for e in view["events"] if e["kind"] == "msg" and e["from"] == "B"}
    assert sent["A"]["answered"] is True and sent["C"]["answered"] is False
    assert sent["client"]["label"].startswith("failed")
    assert view["summary"].endswith("failed (only 2)")


def test_a_forwarded_request_starts_at_the_node_the_client_reached() -> None:
    trace = [
        [0.0, "D forwards to B"],
        [1.0, "B coordinates put kv/a as B:1, needs 2"],
        [1.0, "sent to A"],
        [3.0, "ack from A"],
        [3.0, "answered the client"],
    ]
    view = request_view(
        "put",
        {"ok": True, "coordinator": "B", "keyspace": "kv", "key": "a", "trace": trace},
        "QUORUM",
        ["B", "A", "C"],
    )
    msgs = [(e["from"], e["to"]) for e in view["events"] if e["kind"] == "msg"]
    assert msgs[:2] == [("client", "D"), ("D", "B")]
    assert view["participants"] == ["client", "B", "A", "C", "D"]


def test_the_pages_log_gets_the_repls_words_unwrapped_so_it_wraps_them_once() -> None:
    (snap,) = snapshots(["put kv k 1 ctx=none via=B; put kv k 2 ctx=none via=B; get kv k"])
    text = snap["log"][0]["text"]
    explained = next(line for line in text.splitlines() if line.startswith("2 siblings"))
    # One line however long: the browser wraps it at its box (wrapped at 88 here too, it broke
    # a sentence at two widths), and it ends where the sentence does.
    assert len(explained) > 120 and explained.endswith("replaces them."), text
