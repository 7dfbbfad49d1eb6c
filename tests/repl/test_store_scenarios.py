"""The store's behaviour end to end: REPL commands on an in-process trio cluster (virtual clock)."""

from __future__ import annotations

from typing import Any

Run = Any


def test_cart42_story_siblings_then_merge(repl: Run) -> None:
    out = repl(
        [
            "put kv cart:42 '[\"rice\"]'",
            "get kv cart:42",
            "partition A | B C",
            "sleep 4s",
            'put kv cart:42 \'["rice","oil"]\' via=A c=ONE',
            'put kv cart:42 \'["rice","salt"]\' via=B',
            "heal",
            "sleep 4s",
            "get kv cart:42 c=ALL",
            'put kv cart:42 \'["oil","rice","salt"]\'',
            "get kv cart:42 c=ALL",
        ],
        nodes=3,
    )
    assert [o["ok"] for o in out] == [True] * len(out)
    first_ctx = out[1]["context"]
    assert out[4]["coordinator"] == "A" and out[5]["coordinator"] == "B"
    siblings = out[8]
    assert siblings["siblings"] == 2
    assert sorted(siblings["values"]) == [["rice", "oil"], ["rice", "salt"]]
    assert siblings["context"] and siblings["context"] != first_ctx
    assert out[9]["context"] == "auto"
    merged = out[10]
    assert merged["siblings"] == 1 and merged["values"] == [["oil", "rice", "salt"]]


def test_two_puts_with_the_same_context_through_one_coordinator_both_survive(repl: Run) -> None:
    out = repl(["put kv k one via=A", "put kv k two via=A", "get kv k c=ALL"], nodes=3)
    assert sorted(out[2]["values"]) == ["one", "two"]
    assert out[2]["siblings"] == 2


def test_counter_partition_and_retry(repl: Run) -> None:
    out = repl(
        [
            "incr counters visits 10",
            "partition A | B C",
            "sleep 4s",
            "incr counters visits 1 via=A c=ONE",
            "incr counters visits 1 via=B id=r-1",
            "incr counters visits 1 via=B id=r-1",
            "heal",
            "sleep 4s",
            "get counters visits c=ALL",
        ],
        nodes=3,
    )
    assert [o["ok"] for o in out] == [True] * len(out)
    assert out[8]["values"] == [12]
    assert out[8]["siblings"] == 1


def test_delete_leaves_a_tombstone_a_stale_replica_cannot_resurrect(repl: Run) -> None:
    out = repl(
        [
            "put kv k alive c=ALL",
            "get kv k",
            "kill C",
            "sleep 4s",
            "delete kv k",
            "revive C",
            "sleep 4s",
            "clock kv k",
            "get kv k c=ALL",
            "get kv k via=C c=ONE",
            "sleep 1s",
            "get kv k via=C c=ONE",
        ],
        nodes=3,
        repair_interval=0,  # background anti-entropy would give C the tombstone before `clock`
    )
    assert out[4]["ok"] and out[4]["cmd"] == "delete"
    stale = out[7]["replicas"]["C"]
    assert [v["value"] for v in stale] == ["alive"]  # C missed the delete
    assert out[8]["found"] is False and out[8]["values"] == []
    assert out[8]["tombstones"] == 1
    assert out[11]["found"] is False  # read repair gave C the tombstone


def test_killed_home_replica_hinted_handoff(repl: Run) -> None:
    out = repl(["prefs kv cart:7"], nodes=5)
    home = out[0]["replicas"]
    victim, fallback = home[1], out[0]["fallbacks"][0]
    out = repl(
        [
            f"kill {victim}",
            "sleep 4s",
            # ALL: the answer waits for the fallback too, so the hint is stored when `hints` asks
            # (at QUORUM the two other replicas may answer first).
            "put kv cart:7 '[\"tea\"]' c=ALL",
            "hints",
            f"revive {victim}",
            "sleep 4s",
            "hints",
            "clock kv cart:7",
        ],
        nodes=5,
    )
    put = out[2]
    assert put["ok"] and put["acks"] == 3
    assert put["hinted"] == [f"{fallback} for {victim}"]
    (queue,) = out[3]["queues"]
    assert (queue["holder"], queue["target"], queue["count"]) == (fallback, victim, 1)
    assert 0 <= queue["oldest_s"] < 0.1
    assert out[6]["queues"] == []
    assert [v["value"] for v in out[7]["replicas"][victim]] == [["tea"]]


def test_strict_quorum_two_of_three_down_is_unavailable(repl: Run) -> None:
    out = repl(["keyspace create bank quorum=strict", "prefs bank acct:1"], nodes=5)
    a, b = out[1]["replicas"][:2]
    out = repl(
        ["keyspace create bank quorum=strict", f"kill {a}", f"kill {b}", "sleep 4s", "put bank acct:1 100"],
        nodes=5,
    )
    failure = out[4]
    assert failure["ok"] is False and failure["code"] == "unavailable"
    assert "1 of 3 replicas reachable, QUORUM needs 2" in failure["error"]


def test_the_success_ratio_counts_unavailable_requests_but_not_bad_input(repl: Run) -> None:
    out = repl(["keyspace create bank quorum=strict", "prefs bank acct:1"], nodes=5)
    a, b = out[1]["replicas"][:2]
    lines = ["keyspace create bank quorum=strict", "put bank acct:1 100", f"kill {a}", f"kill {b}"]
    lines += ["sleep 4s", "put bank acct:1 200", "get bank acct:1", "put bank acct:1 x c=SOME", "metrics"]
    out = repl(lines, nodes=5)
    assert [o["ok"] for o in out[5:8]] == [False, False, False]
    # A coordinator's "too few replicas" is asked of one more coordinator (client/data_client.py
    # `goes_around`), which says the same: each failed request is counted by both.
    assert [o["error"].count("said the same") for o in out[5:7]] == [1, 1], out[5:7]
    ops = out[-1]["ops"]
    # The killed nodes took their own counts with them: one put may have been coordinated there.
    assert ops["put"]["QUORUM"]["count"] - ops["put"]["QUORUM"]["ok"] == 2
    assert ops["get"]["QUORUM"] == {**ops["get"]["QUORUM"], "count": 2, "ok": 0, "success": 0.0}


def test_read_repair_fixes_a_replica_that_missed_a_write(repl: Run) -> None:
    out = repl(
        [
            "partition A B | C",
            "sleep 4s",
            "put kv k v1 via=A",
            "heal",
            "sleep 4s",
            "clock kv k",
            "get kv k via=A",
            "sleep 1s",
            "clock kv k",
            "metrics",
        ],
        nodes=3,
        repair_interval=0,  # background anti-entropy would give C the write before the read does
    )
    assert out[5]["replicas"]["C"] == []
    assert [v["value"] for v in out[8]["replicas"]["C"]] == ["v1"]
    assert out[9]["read_repairs"] >= 1 and out[9]["stale_reads"] >= 1


def test_bad_input_gives_one_line_errors_and_the_session_goes_on(repl: Run) -> None:
    out = repl(
        [
            "bogus",
            "stauts",
            'put kv k \'["unclosed"',
            "put kv k v ctx=not-a-context",
            "kill Z",
            "get kv k c=TWO",
            "delay A lots",
            "incr kv k",
            "put kv k fine",
        ]
    )
    assert [o["ok"] for o in out] == [False] * 8 + [True]
    assert {o["code"] for o in out[:8]} == {"bad_input"}
    assert "did you mean status" in out[1]["error"]
    assert all("\n" not in o["error"] for o in out[:8])


def test_json_shapes_of_views(repl: Run) -> None:
    lines = ["put kv k v", "sleep 1s", "get kv k", "status", "prefs kv k", "clock kv k", "hints", "metrics"]
    put, _, get, status, prefs, clock, hints, metrics, incr = repl([*lines, "incr counters c 2"])
    assert {"cmd", "ok", "coordinator", "acks"} <= put.keys()
    assert {"cmd", "ok", "keyspace", "key", "found", "values", "context", "siblings"} <= get.keys()
    node = status["nodes"][0]
    assert {"id", "zone", "up", "status", "tokens", "owns", "keys"} <= node.keys()
    assert (node["id"], node["zone"], node["status"], node["tokens"]) == ("A", "z1", "normal", 8)
    assert abs(sum(n["owns"] for n in status["nodes"]) - 1.0) < 0.01
    assert len(prefs["replicas"]) == 3 and set(prefs["zones"]) >= set(prefs["replicas"])
    assert len({prefs["zones"][r] for r in prefs["replicas"]}) == 3  # three zones for three replicas
    for versions in clock["replicas"].values():
        assert {"dot", "clock", "value", "tombstone"} <= versions[0].keys()
    assert hints["queues"] == []
    q = metrics["ops"]["get"]["QUORUM"]
    assert {"count", "ok", "p50_ms", "p99_ms"} <= q.keys() and q["count"] == 1
    assert {"stale_reads", "read_repairs", "hints"} <= metrics.keys()
    assert {"pending", "oldest_s"} <= metrics["hints"].keys()
    assert incr == {**incr, "cmd": "incr", "ok": True, "value": 2}


def test_a_message_that_breaks_the_handler_is_dropped_and_the_node_lives_on() -> None:
    import trio
    import trio.testing

    from bhandar_cli.client.openers import ClusterOptions
    from bhandar_cli.core.protocol.messages import SchemaUpdate
    from bhandar_cli.repl.batch import open_session

    async def main() -> list[dict[str, Any]]:
        async with open_session(ClusterOptions(nodes=3, memory=True), "json") as session:
            cluster = session.client.backend.cluster  # type: ignore[attr-defined]
            # Well-formed but ill-typed, as a rogue peer could send it: the keyspaces are not
            # keyspace definitions (a tuple's items are not checked as it is built, compiled or not).
            cluster.host("A").deliver("B", SchemaUpdate(("not a keyspace",)))  # type: ignore[arg-type]
            await trio.sleep(0.1)
            assert cluster.host("A").errors == 1 and cluster.host("A").alive
            return [r.to_json() for r in await session.run_line("put kv k v via=A; get kv k via=A")]

    put, get = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert put["ok"] and get["values"] == ["v"]


def test_a_put_forwarded_into_a_fresh_partition_falls_back_and_its_trace_says_so(repl: Run) -> None:
    """Right after `partition A | B C D E`, B still believes A up and forwards to it: the put must
    not fail with "forwarded to A, which did not answer in time" but go to another replica."""
    keys = [f"k{i}" for i in range(8)]
    out = repl(["trace on", "partition A | B C D E", *(f"put kv {k} v via=B" for k in keys)], nodes=5)
    puts = out[2:]
    assert [o["ok"] for o in puts] == [True] * len(keys), puts
    fell_back = [o for o in puts if any("falls back" in step for _, step in o["trace"])]
    assert fell_back, "no key was forwarded to A: the test lost its point"
    for o in fell_back:
        steps = [step for _, step in o["trace"]]
        assert steps[0].startswith("B forwards to A as B~x:")
        assert steps[1].startswith("A did not answer within")
        assert o["coordinator"] != "A"
