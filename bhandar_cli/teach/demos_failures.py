"""Demos about failures: quorum arithmetic, sloppy quorum with hinted handoff, read repair."""

from __future__ import annotations

from bhandar_cli.client import ClusterOptions
from bhandar_cli.core.model import count
from bhandar_cli.teach.demo_kit import (
    Check,
    Demo,
    DemoContext,
    Expect,
    Step,
    all_replicas_equal,
    failed_saying,
    get_values,
    home_holds,
    metric_at_least,
    ok_with,
    prefs_shows_down,
    prefs_sizes,
)

# --- 2. quorum: R + W > N ---------------------------------------------------------------------------

TEA, MILK = ["tea"], ["tea", "milk"]
ALL_FAILS = ("2 of 3", "ALL needs 3")  # the counts the error sentence must give


QUORUM = Demo(
    name="quorum",
    title="Quorums: R + W > N",
    summary="kill one of three replicas: QUORUM still works, ALL fails, ONE can read stale data",
    guide="docs/quorum-levels.md",
    options=ClusterOptions(nodes=3, zones=3, repair_interval=0),
    steps=(
        Step(
            "Every key has a preference list: the N = 3 nodes that hold its replicas, "
            "found by walking the ring clockwise from the key's token. "
            "We create the keyspace carts and show the preference list of cart:7. "
            "QUORUM means floor(3 / 2) + 1 = 2 replicas: W = 2 for a write, R = 2 for a read.",
            ["keyspace create carts", "prefs carts cart:7"],
            (Expect("cart:7 has three replicas", prefs_sizes(3, 0)),),
        ),
        Step(
            "We write tea and read it back at QUORUM. The coordinator answers after the second "
            "acknowledgement; the third replica gets the write a moment later. "
            "One second on, the clock command shows all three replicas holding tea.",
            ["put carts cart:7 '[\"tea\"]'", "get carts cart:7", "sleep 1s", "clock carts cart:7"],
            (
                Expect("the put needs and gets 2 acks", ok_with("put", acks=2, needed=2)),
                Expect("the get returns tea", get_values([TEA])),
                Expect("every replica holds tea", all_replicas_equal),
            ),
        ),
        Step(
            lambda ctx: (
                f"Now we kill {ctx.replicas()[1]}, the second replica of cart:7, "
                "and wait four seconds for the others to notice. The preference list shows it down."
            ),
            lambda ctx: [f"kill {ctx.replicas()[1]}", "sleep 4s", "prefs carts cart:7"],
            (Expect("the second replica is down", prefs_shows_down(1)),),
        ),
        Step(
            "With one replica down, two are left. Two is enough for QUORUM: "
            "the put gets its two acks and the get its two replies.",
            ['put carts cart:7 \'["tea","milk"]\'', "get carts cart:7"],
            (
                Expect("the QUORUM put succeeds with 2 acks", ok_with("put", acks=2)),
                Expect("the QUORUM get returns tea and milk", get_values([MILK])),
            ),
        ),
        Step(
            "ALL needs every replica: three of three. With one down, ALL fails. "
            "Read the error: it says how many replicas answered and how many were needed.",
            ['put carts cart:7 \'["tea","sugar"]\' c=ALL', "get carts cart:7 c=ALL"],
            (
                Expect("the ALL put fails: 2 of 3, ALL needs 3", failed_saying("put", *ALL_FAILS)),
                Expect("the ALL get fails the same way", failed_saying("get", *ALL_FAILS)),
            ),
            failures_expected=True,
        ),
        Step(
            "ONE needs a single replica. It is the fastest and the most available level.",
            ["get carts cart:7 c=ONE"],
            (Expect("the ONE get returns tea and milk", get_values([MILK])),),
        ),
        Step(
            lambda ctx: (
                f"We revive {ctx.replicas()[1]}. It missed the tea-and-milk write "
                "(background anti-entropy, off in this demo, would bring it within seconds). "
                f"Now we read with c=ONE through {ctx.replicas()[1]} itself. "
                "R + W = 1 + 2 = 3, which is not more than N = 3: "
                "the one replica we read may not be one of the two that took the write."
            ),
            lambda ctx: [
                f"revive {ctx.replicas()[1]}",
                "sleep 4s",
                f"get carts cart:7 c=ONE via={ctx.replicas()[1]}",
            ],
            (Expect("the ONE read is stale: it returns only tea", get_values([TEA])),),
            then="A stale read. The write was acknowledged, but this read could not see it.",
        ),
        Step(
            lambda ctx: (
                f"The same read at QUORUM, through {ctx.replicas()[1]} again. "
                "R + W = 2 + 2 = 4, more than N = 3: every read quorum overlaps every write quorum "
                "in at least one replica, so the read sees the latest write. "
                "Read repair then fixes the stale replica, and the metrics count it."
            ),
            lambda ctx: [
                f"get carts cart:7 via={ctx.replicas()[1]}",
                "sleep 1s",
                "clock carts cart:7",
                "metrics show=repairs",
            ],
            (
                Expect("the QUORUM read returns tea and milk", get_values([MILK])),
                Expect("after read repair every replica is equal", all_replicas_equal),
                Expect("the metrics count a stale read", metric_at_least("stale_reads")),
            ),
        ),
    ),
)


# --- 3. handoff: sloppy quorum and hinted handoff ---------------------------------------------------


def _hinted_to_fallback(victims: int) -> Check:
    def check(ctx: DemoContext) -> str | None:
        put = ctx.reply("put")
        if not put.get("ok"):
            return f"the put failed: {put.get('error')}"
        down = ctx.replicas()[-victims:]
        targets = sorted(h.split(" for ")[1] for h in put.get("hinted", []))
        holders = {h.split(" for ")[0] for h in put.get("hinted", [])}
        if targets != sorted(down) or not holders <= set(ctx.fallbacks()):
            return f"the put's hints were {put.get('hinted', [])}"
        return None

    return check


def _queue_for(victims: int) -> Check:
    def check(ctx: DemoContext) -> str | None:
        queues = ctx.reply("hints")["queues"]
        want = set(ctx.replicas()[-victims:])
        targets = {q["target"] for q in queues}
        holders = {q["holder"] for q in queues}
        if targets != want or not holders <= set(ctx.fallbacks()):
            return f"the hint queues are {queues}"
        return None

    return check


def _no_hints(ctx: DemoContext) -> str | None:
    queues = ctx.reply("hints")["queues"]
    return f"hints still pending: {queues}" if queues else None


def _pending(ctx: DemoContext) -> str:
    """What the step's `hints` reply counts, said as the class reads it in the table above."""
    hints = ctx.reply("hints")
    if not hints["pending"]:
        return "No hints pending: each holder delivered its hints and dropped them."
    held = ", ".join(
        f"{q['holder']} holds {count(q['count'], 'hint')} for {q['target']}" for q in hints["queues"]
    )
    return f"{count(hints['pending'], 'hint')} pending: {held}."


def _hints_delivered(ctx: DemoContext) -> str | None:
    hints = ctx.reply("metrics")["hints"]
    return None if hints["delivered"] == hints["stored"] > 0 else f"the hint metrics are {hints}"


HANDOFF = Demo(
    name="handoff",
    title="Sloppy quorum and hinted handoff",
    summary="home replicas down: fallbacks take the writes with hints and hand them back on return",
    guide="docs/failures-and-hints.md",
    options=ClusterOptions(nodes=5, zones=3),
    steps=(
        Step(
            "Five nodes now, and N = 3. We create the keyspace carts. "
            "The preference list of cart:7 has three home replicas, "
            "and after them the fallbacks: the next healthy nodes on the ring walk.",
            ["keyspace create carts", "prefs carts cart:7"],
            (Expect("cart:7 has 3 home replicas and 2 fallbacks", prefs_sizes(3, 2)),),
        ),
        Step(
            lambda ctx: (
                f"We kill {ctx.replicas()[2]}, the third home replica, and wait four seconds "
                "so the failure detector marks it down."
            ),
            lambda ctx: [f"kill {ctx.replicas()[2]}", "sleep 4s", "prefs carts cart:7"],
            (Expect("the third home replica is down", prefs_shows_down(2)),),
        ),
        Step(
            "We write tea to cart:7. In a sloppy quorum the coordinator does not wait for the dead node: "
            "it sends the write to the first healthy fallback instead, with a hint "
            "that names the intended owner. The put reply shows the hint.",
            # The put answers after two acks; the hinted copy may still be on its way: give it a second.
            ["put carts cart:7 '[\"tea\"]'", "sleep 1s"],
            (Expect("a fallback took the write with a hint for the dead replica", _hinted_to_fallback(1)),),
        ),
        Step(
            "The hints command lists the hint queues: who holds hints, and for whom. "
            "The clock command shows the fallback holding the value 'as hint', not as a replica. "
            "A QUORUM read still works, and gives us the context for the next write.",
            ["hints", "clock carts cart:7", "get carts cart:7"],
            (
                Expect("one fallback holds a hint for the dead replica", _queue_for(1)),
                Expect("a QUORUM read still returns tea", get_values([TEA])),
            ),
            then=_pending,
        ),
        Step(
            lambda ctx: (
                f"Now the sloppy part. We also kill {ctx.replicas()[1]}. "
                f"Only {ctx.replicas()[0]} is left at home, and QUORUM needs two. "
                "A strict quorum would refuse this write. "
                "A sloppy quorum counts the fallbacks: the first N healthy nodes on the walk."
            ),
            lambda ctx: [
                f"kill {ctx.replicas()[1]}",
                "sleep 4s",
                'put carts cart:7 \'["tea","milk"]\'',
                "sleep 1s",
                "hints",
            ],
            (
                Expect("the QUORUM put succeeds with two home replicas down", _hinted_to_fallback(2)),
                Expect("fallbacks hold hints for both dead replicas", _queue_for(2)),
            ),
            then=_pending,
        ),
        Step(
            "We revive both nodes and wait. When a holder sees the owner is back, it delivers "
            "its hints and drops them: this is hinted handoff. The hint queues are empty again.",
            lambda ctx: [f"revive {ctx.replicas()[1]}", f"revive {ctx.replicas()[2]}", "sleep 4s", "hints"],
            (Expect("no hints are pending", _no_hints),),
            then=_pending,
        ),
        Step(
            "The clock command shows all three home replicas holding tea and milk, "
            "although two of them were down when it was written. "
            "The metrics count the hints stored and delivered.",
            ["clock carts cart:7", "metrics show=repairs"],
            (
                Expect("every home replica holds tea and milk", all_replicas_equal),
                Expect("the second home replica holds tea and milk", home_holds(1, [MILK])),
                Expect("the third home replica holds tea and milk", home_holds(2, [MILK])),
                Expect("every stored hint was delivered", _hints_delivered),
            ),
        ),
    ),
)


# --- 6. readrepair ----------------------------------------------------------------------------------


def _isolated_holds_nothing(ctx: DemoContext) -> str | None:
    name = ctx.replicas()[2]
    versions = ctx.reply("clock")["replicas"].get(name)
    return None if versions == [] else f"{name} holds {versions}"


READREPAIR = Demo(
    name="readrepair",
    title="Read repair: a read fixes a replica that missed a write",
    summary="a replica misses a write during a partition; the next read finds it stale and repairs it",
    guide="docs/quorum-levels.md (read repair)",
    options=ClusterOptions(nodes=3, zones=3, repair_interval=0),
    steps=(
        Step(
            "We create the keyspace carts. The preference list of cart:9: three replicas.",
            ["keyspace create carts", "prefs carts cart:9"],
        ),
        Step(
            lambda ctx: (
                f"We cut {ctx.replicas()[2]}, the third replica, off from the others, "
                f"and write dal through {ctx.replicas()[0]}. Two replicas take it: a quorum."
            ),
            lambda ctx: [
                f"partition {ctx.replicas()[2]}",
                "sleep 4s",
                f"put carts cart:9 '[\"dal\"]' via={ctx.replicas()[0]}",
            ],
            (Expect("the put succeeds with 2 acks", ok_with("put", acks=2)),),
        ),
        Step(
            lambda ctx: (
                f"We heal the partition. The clock command shows that {ctx.replicas()[2]} "
                "holds nothing: it missed the write. (Background anti-entropy, off in this demo, "
                "would bring it the write within seconds.)"
            ),
            ["heal", "sleep 4s", "clock carts cart:9"],
            (Expect("the third replica holds nothing", _isolated_holds_nothing),),
        ),
        Step(
            "A normal QUORUM read. The coordinator answers after two replies, then looks at the "
            "third reply too. It is older, so the coordinator sends it the merged version: read repair.",
            lambda ctx: [f"get carts cart:9 via={ctx.replicas()[0]}", "sleep 1s", "clock carts cart:9"],
            (
                Expect("the read returns dal", get_values([["dal"]])),
                Expect("after the read every replica holds dal", all_replicas_equal),
            ),
        ),
        Step(
            "The metrics count each repair. Stale reads found by read repair are one of the "
            "store's service level indicators.",
            ["metrics show=repairs"],
            (Expect("the metrics count a read repair", metric_at_least("read_repairs")),),
        ),
    ),
)
