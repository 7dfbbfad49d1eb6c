"""Demos about versions: siblings (cart:42), last-writer-wins, the PN-Counter, tombstones."""

from __future__ import annotations

from bhandar_cli.client import ClusterOptions
from bhandar_cli.teach.demo_kit import (
    Demo,
    DemoContext,
    Expect,
    Step,
    all_replicas_equal,
    get_values,
    home_holds,
    ok_with,
    show,
)

# --- 1. siblings: the cart:42 story -----------------------------------------------------------------

RICE, OIL, SALT, MERGED = ["rice"], ["rice", "oil"], ["rice", "salt"], ["oil", "rice", "salt"]


def _first_dot(ctx: DemoContext) -> str | None:
    versions = ctx.reply("get")["versions"]
    clocks = [(v["dot"], v["clock"]) for v in versions]
    return None if clocks == [(["A", 1], {"A": 1})] else f"the get shows dots and clocks {clocks}"


def _a_and_b_concurrent(ctx: DemoContext) -> str | None:
    clock = ctx.reply("clock")
    held = {node: [v["clock"] for v in versions or []] for node, versions in clock["replicas"].items()}
    if held != {"A": [{"A": 2}], "B": [{"A": 1, "B": 1}], "C": [{"A": 1, "B": 1}]}:
        return f"the replicas hold the clocks {held}"
    rel = {(r["a"], r["b"]): r["relation"] for r in clock["relations"]}
    if rel.get(("A", "B")) != "concurrent" or rel.get(("B", "C")) != "equal":
        return f"the clocks relate as {rel}"
    return None


def _a_sees_b_and_c_down(ctx: DemoContext) -> str | None:
    nodes = {n["id"]: n for n in ctx.reply("status")["nodes"]}
    seen = nodes["A"].get("sees_down")
    return None if seen == ["B", "C"] else f"A sees {seen or 'nobody'} down"


def _merged_clock(ctx: DemoContext) -> str | None:
    (version,) = ctx.reply("get")["versions"]
    want = {"A": 2, "B": 1, "C": 1}
    return None if version["clock"] == want else f"the merged version has clock {version['clock']}"


SIBLINGS = Demo(
    name="siblings",
    title="Siblings: two shoppers, one cart, a partition",
    summary="cart:42 takes a write on each side of a partition; the store keeps both as siblings",
    guide="docs/versions-and-siblings.md",
    options=ClusterOptions(nodes=3, zones=3),
    steps=(
        Step(
            "We have three nodes, A, B and C, and every key has three replicas. "
            "We create the keyspace carts (a keyspace exists only once created), "
            "put rice into cart:42 through A, then read it back. "
            "Each version carries a vector clock; Bhandar uses a dotted version vector. "
            "Look at the dot A:1: coordinator A, its first write. "
            "The get also returns a context: the version vector of everything this read has seen.",
            ["keyspace create carts", "put carts cart:42 '[\"rice\"]' via=A", "get carts cart:42"],
            (
                Expect("the get shows one value, rice", get_values([RICE])),
                Expect("its dot is A:1 and its clock {A:1}", _first_dot),
            ),
        ),
        Step(
            "Now we cut the network: A on one side, B and C on the other. "
            "We wait four seconds so that each node's failure detector notices. "
            "In the status table, look at the column 'sees down'.",
            ["partition A | B C", "sleep 4s", "status"],
            (Expect("A sees B and C down", _a_sees_b_and_c_down),),
        ),
        Step(
            "Shopper one adds oil through A. Alone, A cannot reach a quorum of two, "
            "so this write asks for c=ONE: one acknowledgement is enough. "
            "It carries the context of our get, so it replaces rice.",
            ['put carts cart:42 \'["rice","oil"]\' via=A c=ONE'],
            (Expect("A acknowledges the write alone", ok_with("put", coordinator="A", acks=1)),),
        ),
        Step(
            "Shopper two adds salt through B, on the other side. B and C make a quorum. "
            "This write carries the same old context: it also replaces rice, but it has never seen oil. "
            "The clock command asks every replica what it holds. "
            "A has the clock {A:2}; B and C have {A:1, B:1}. Neither clock descends from the other.",
            ['put carts cart:42 \'["rice","salt"]\' via=B', "clock carts cart:42"],
            (
                Expect("B's write reaches a quorum", ok_with("put", coordinator="B", acks=2)),
                Expect("A holds {A:2}, B and C hold {A:1, B:1}: concurrent", _a_and_b_concurrent),
            ),
        ),
        Step(
            "The partition heals. We wait four seconds until the nodes see each other again.",
            ["heal", "sleep 4s"],
        ),
        Step(
            "Now we read through C with c=ALL. Which cart is right? The store does not guess. "
            "The get returns both versions as siblings, each with its dot and its clock, "
            "and one context that covers both.",
            ["get carts cart:42 c=ALL via=C"],
            (Expect("the get shows two siblings: rice+oil and rice+salt", get_values([OIL, SALT])),),
            then="Two concurrent writes, two siblings. Nothing acknowledged was lost.",
        ),
        Step(
            "The client merges the siblings: the union of both carts. It writes the result back "
            "with the context from that get (ctx=auto). The context says this write has seen both "
            "siblings, so it replaces them. Then we read again.",
            ['put carts cart:42 \'["oil","rice","salt"]\' via=C', "get carts cart:42 c=ALL"],
            (
                Expect("one value remains: oil, rice, salt", get_values([MERGED])),
                Expect("its clock is {A:2, B:1, C:1}", _merged_clock),
            ),
        ),
        Step(
            "One second later, every replica holds the merged cart with the same clock.",
            ["sleep 1s", "clock carts cart:42"],
            (Expect("every replica is equal", all_replicas_equal),),
            then="The merge written via C has the clock {A:2, B:1, C:1}: it descends from both siblings.",
        ),
    ),
)


# --- 4. lww: last write wins drops a write ----------------------------------------------------------


def _one_survivor(ctx: DemoContext) -> str | None:
    get = ctx.reply("get")
    if not get.get("ok"):
        return f"the get failed: {get.get('error')}"
    return None if get["values"] in ([55], [60]) else f"the get returned {show(get['values'])}"


def _lww_verdict(ctx: DemoContext) -> str:
    (kept,) = ctx.reply("get")["values"]
    lost = 55 if kept == 60 else 60
    return (
        f"Only {kept} survived. The write of {lost} was acknowledged to its client, "
        "and then silently dropped. No error, no sibling."
    )


LWW = Demo(
    name="lww",
    title="Last write wins silently drops a write",
    summary="the same partition story on an lww keyspace: one of two acknowledged writes disappears",
    guide="docs/counters-and-lww.md",
    options=ClusterOptions(nodes=3, zones=3),
    steps=(
        Step(
            "We make a keyspace, prices, with the policy lww: last write wins. "
            "It keeps one value per key, chosen by timestamp. "
            "Beside it, the keyspace notes keeps the default policy: siblings.",
            ["keyspace create prices policy=lww", "keyspace create notes"],
            (Expect("prices uses lww", ok_with("keyspace", index=0, policy="lww")),),
        ),
        Step(
            "The price of rice is 50, written to both keyspaces through A and read back.",
            ["put prices rice 50 via=A", "put notes rice 50 via=A", "get prices rice", "get notes rice"],
            (
                Expect("prices holds 50", get_values([50], 0)),
                Expect("notes holds 50", get_values([50], 1)),
            ),
        ),
        Step(
            "We cut the network: A on one side, B and C on the other, and wait for the failure detector.",
            ["partition A | B C", "sleep 4s"],
        ),
        Step(
            "Two clerks change the price at the same time, one on each side: "
            "55 through A at c=ONE, then 60 through B. Both writes are acknowledged, in both keyspaces.",
            [
                "put prices rice 55 via=A c=ONE",
                "put notes rice 55 via=A c=ONE",
                "put prices rice 60 via=B",
                "put notes rice 60 via=B",
            ],
        ),
        Step(
            "The partition heals. We read prices at c=ALL.",
            ["heal", "sleep 4s", "get prices rice c=ALL"],
            (Expect("the lww keyspace returns a single price", _one_survivor),),
            then=_lww_verdict,
        ),
        Step(
            "The same story in the siblings keyspace. Here both prices come back as siblings, "
            "and the application decides which one is right.",
            ["get notes rice c=ALL"],
            (Expect("the siblings keyspace returns both 55 and 60", get_values([55, 60])),),
            then="LWW is simple and loses data under concurrency. Use it only where that is acceptable.",
        ),
    ),
)


# --- 5. counter: PN-Counter ------------------------------------------------------------------------


def _retry_counted_once(ctx: DemoContext) -> str | None:
    first, retry = ctx.last_two("incr")
    if not (first.get("ok") and retry.get("ok")):
        return "an increment failed"
    return None if retry["value"] == first["value"] else f"the retry moved the counter to {retry['value']}"


COUNTER = Demo(
    name="counter",
    title="PN-Counter: increments that add up across a partition",
    summary="increments on both sides of a partition add up; a retried increment counts once",
    guide="docs/counters-and-lww.md",
    options=ClusterOptions(nodes=3, zones=3),
    steps=(
        Step(
            "The keyspace counters holds PN-Counters. Each replica bumps only its own entry: "
            "P for increments, N for decrements. The value is the sum of P minus the sum of N. "
            "We start the visits counter at 10.",
            ["incr counters visits 10", "get counters visits"],
            (Expect("the counter reads 10", get_values([10])),),
        ),
        Step(
            "We cut the network: A alone, B and C together.",
            ["partition A | B C", "sleep 4s"],
        ),
        Step(
            "One visit is counted through A, at c=ONE. On the other side, an order of 2 visits is "
            "counted through B with the request id order-7.",
            ["incr counters visits 1 via=A c=ONE", "incr counters visits 2 via=B id=order-7"],
        ),
        Step(
            "Suppose B's answer was lost and the client retries, through C this time, "
            "with the same request id. The replicas remember order-7, so the retry counts once: "
            "the value does not move.",
            ["incr counters visits 2 via=C id=order-7"],
            (Expect("the retry does not change the counter", _retry_counted_once),),
        ),
        Step(
            "A refund: minus one through C. That goes into C's N entry.",
            ["incr counters visits -1 via=C"],
        ),
        Step(
            "We heal and read at c=ALL. Merging takes the largest P and N of each replica's entry, "
            "so nothing is counted twice and nothing is lost: 10 + 1 + 2 - 1 = 12.",
            ["heal", "sleep 4s", "get counters visits c=ALL"],
            (Expect("the counter reads 12", get_values([12])),),
        ),
    ),
)


# --- 7. tombstone ----------------------------------------------------------------------------------


def _tombstone_everywhere(ctx: DemoContext) -> str | None:
    for name, versions in ctx.reply("clock")["replicas"].items():
        if not versions or not all(v["tombstone"] for v in versions):
            return f"{name} holds {versions}"
    return None


TOMBSTONE = Demo(
    name="tombstone",
    title="Delete writes a tombstone",
    summary="a replica misses a delete; the tombstone keeps the old value from coming back",
    guide="docs/versions-and-siblings.md (deletes)",
    options=ClusterOptions(nodes=3, zones=3, repair_interval=0),
    steps=(
        Step(
            "We create the keyspace carts, write a value to all three replicas and read it, "
            "which gives us its context.",
            [
                "keyspace create carts",
                "prefs carts cart:5",
                "put carts cart:5 '[\"ghee\"]' c=ALL",
                "get carts cart:5",
            ],
            (Expect("the get returns ghee", get_values([["ghee"]])),),
        ),
        Step(
            lambda ctx: (
                f"We kill {ctx.replicas()[2]}, and delete cart:5 while it is down. "
                "A delete is a write too: it writes a tombstone, a sibling with no value, "
                "and the context says which versions it deletes."
            ),
            lambda ctx: [f"kill {ctx.replicas()[2]}", "sleep 4s", "delete carts cart:5"],
            (Expect("the delete succeeds", ok_with("delete", acks=2)),),
        ),
        Step(
            lambda ctx: (
                f"We revive {ctx.replicas()[2]}. It still holds ghee: it missed the delete "
                "(background anti-entropy, off in this demo, would bring it the tombstone within "
                "seconds). If the store had simply forgotten the key, this old copy could bring ghee back."
            ),
            lambda ctx: [f"revive {ctx.replicas()[2]}", "sleep 4s", "clock carts cart:5"],
            (Expect("the revived replica still holds ghee", home_holds(2, [["ghee"]])),),
        ),
        Step(
            "A read at c=ALL. The tombstone's clock descends from ghee's, so the tombstone wins: "
            "not found. Read repair sends the tombstone to the stale replica.",
            ["get carts cart:5 c=ALL", "sleep 1s", "clock carts cart:5"],
            (
                Expect("the get finds nothing", ok_with("get", found=False, tombstones=1)),
                Expect("every replica now holds the tombstone", _tombstone_everywhere),
            ),
            then="Tombstones are reaped only after every replica holds them, so the value stays deleted.",
        ),
    ),
)
