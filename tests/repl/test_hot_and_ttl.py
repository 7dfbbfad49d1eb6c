"""`hot` finds the key a skewed workload hammers, with its replicas; a ttl keyspace's values
vanish at their expiry, in the REPL on an in-process cluster under a virtual clock."""

from __future__ import annotations

from typing import Any

Run = Any


def test_hot_shows_the_skewed_key_first_with_its_replicas_and_their_load(repl: Run) -> None:
    lines = ["keyspace create bench policy=lww n=3"]
    for i in range(60):
        lines.append("get bench hot-one" if i % 2 else f"put bench k{i} v")
    lines += ["prefs bench hot-one", "hot 3", "hot 0", "hot x", "metrics"]
    out = repl(lines, nodes=5)
    prefs, top, zero, word, metrics = out[-5:]

    def placed(keys: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
        return [(k["key"], k["replicas"]) for k in keys]

    assert placed(metrics["hot"]) == placed(top["keys"])  # metrics carries the top 3 too
    assert top["ok"] and top["keys"], top
    first = top["keys"][0]
    assert (first["keyspace"], first["key"]) == ("bench", "hot-one")
    assert 0.4 < first["share"] < 0.6  # half of the requests
    assert first["replicas"] == prefs["replicas"]
    assert all(k["share"] < first["share"] / 5 for k in top["keys"][1:])
    load = top["replica_load"]
    assert all(load[r] >= first["share"] for r in first["replicas"])
    others = [x for x in load if x not in first["replicas"]]
    assert others and all(load[x] < first["share"] / 2 for x in others)
    assert abs(sum(first["nodes"].values()) - 1) < 0.01
    assert zero["ok"] is False and "1 to 32 keys" in zero["error"]
    assert word["ok"] is False and "number of keys" in word["error"]


def test_a_ttl_keyspace_forgets_its_values_at_expiry(repl: Run) -> None:
    out = repl(
        [
            "keyspace create cache policy=lww n=2 ttl=60s",
            "put cache session s1",
            "put cache gone g1",
            "delete cache gone",
            "sleep 50s",
            "get cache session",
            "sleep 11s",
            "get cache session",
            "get cache gone",
            "keyspace list",
            "keyspace create cache2 ttl=60s",
            "keyspace create cache3 policy=lww ttl=60x",
            "keyspace create cache policy=lww n=2 ttl=2m",
            "metrics",
        ],
        nodes=3,
    )
    created, _, _, _, _, before, _, after, deleted, listing, siblings, bad, conflict, metrics = out
    assert metrics["values_expired"] == 2  # each of the n=2 replicas swept it into a tombstone
    assert created["ttl"] == 60 and created["created"] is True
    assert before["values"] == ["s1"]
    assert after["found"] is False and after["values"] == [], after
    # A read tells the two kinds of tombstone apart: the swept value expired, the other was deleted
    # (and stays "deleted" once its own time to live has passed too).
    assert (after["tombstones"], after["expired"]) == (1, 1), after
    assert (deleted["found"], deleted["tombstones"], deleted["expired"]) == (False, 1, 0), deleted
    assert {k["name"]: k.get("ttl", 0) for k in listing["keyspaces"]}["cache"] == 60
    assert siblings["ok"] is False and "ttl needs policy=lww" in siblings["error"]
    assert bad["ok"] is False and "bad ttl" in bad["error"]
    assert conflict["ok"] is False and "ttl=1m" in conflict["error"]


def test_a_blind_write_over_an_expired_value_warns_of_no_lost_version(repl: Run) -> None:
    out = repl(
        [
            "keyspace create cache policy=lww n=3 ttl=10s",
            "keyspace create plain policy=lww n=3",
            "put cache k old",
            "put plain k old",
            "sleep 11s",
            "put cache k new ctx=none",
            "put plain k new ctx=none",
            "get cache k",
        ],
        nodes=3,
    )
    cache, plain, got = out[5], out[6], out[7]
    assert cache["ok"] and not any("last-writer-wins" in w for w in cache.get("warnings", [])), cache
    assert any("last-writer-wins replaced 1 version" in w for w in plain.get("warnings", [])), plain
    assert got["values"] == ["new"]


def test_a_get_says_expired_or_deleted_by_the_kind_of_tombstone() -> None:
    from rich.console import Console

    from bhandar_cli.client.outcomes import GetOutcome, SiblingView
    from bhandar_cli.repl.views_data import render_get

    def shown(*tombstones: SiblingView) -> str:
        console = Console(width=120, record=True, color_system=None)
        console.print(
            render_get(
                GetOutcome(
                    keyspace="cache",
                    key="k",
                    found=False,
                    siblings=list(tombstones),
                    context="",
                    coordinator="A",
                    replies=2,
                    needed=2,
                )
            )
        )
        return console.export_text()

    # Expiry keeps the value's content type on its tombstone; a delete's tombstone has none.
    expired = SiblingView(
        value=None, dot=("A", 1), clock={"A": 1}, tombstone=True, ts=10.0, ctype="application/json", raw=None
    )
    deleted = SiblingView(
        value=None, dot=("B", 1), clock={"B": 1}, tombstone=True, ts=12.0, ctype="", raw=None
    )
    assert "(expired: its time to live passed)" in shown(expired)
    assert "(deleted: 1 tombstone)" in shown(deleted) and "expired" not in shown(deleted)
    assert "(deleted: 1 tombstone; expired: its time to live passed)" in shown(expired, deleted)
