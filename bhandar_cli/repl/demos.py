"""The classroom demos of `bhandar demo`, as data: what to say, what to type, what must happen.

This module owns the scripts only; `demo_runner.py` plays them on a live in-process cluster.

A demo is a list of steps. A step has narration (read aloud before the commands), one or more REPL
command lines, and expectations checked against the replies. The expectations are the point: a
demo that stops teaching its lesson because the store changed (a sibling no longer appears, a hint
is no longer stored) must fail loudly rather than show a room full of students the wrong thing.

Steps see what the cluster answered before them through a `DemoContext`, so "kill the second
replica of cart:7" is computed from the `prefs` reply and the demos work on any ring. Checks read
the documented JSON shapes of the replies (DESIGN.md §5), not the rendered tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bhandar_cli.repl.batch import ClusterOptions

Json = dict[str, Any]


class DemoError(Exception):
    """A step could not be computed or checked from what the cluster answered."""


@dataclass
class DemoContext:
    """Every command run so far in this demo, with its reply as JSON; the current step's are last."""

    history: list[tuple[str, Json]] = field(default_factory=list)
    step_start: int = 0

    @property
    def step(self) -> list[Json]:
        """The replies of the current step, in order."""
        return [reply for _, reply in self.history[self.step_start :]]

    def reply(self, cmd: str, index: int = -1) -> Json:
        """The current step's replies to `cmd` (a command name such as "get"), by position."""
        found = [r for r in self.step if r.get("cmd") == cmd]
        try:
            return found[index]
        except IndexError:
            raise DemoError(f"this step has no {cmd} reply number {index}") from None

    def last(self, cmd: str) -> Json:
        """The most recent reply to `cmd` anywhere in the demo so far."""
        for _, reply in reversed(self.history):
            if reply.get("cmd") == cmd:
                return reply
        raise DemoError(f"no {cmd} reply yet")

    def last_two(self, cmd: str) -> tuple[Json, Json]:
        """The two most recent replies to `cmd`, older first."""
        found = [reply for _, reply in self.history if reply.get("cmd") == cmd]
        if len(found) < 2:
            raise DemoError(f"fewer than two {cmd} replies yet")
        return found[-2], found[-1]

    def replicas(self) -> list[str]:
        """The home replicas of the last `prefs` reply (the preference list)."""
        prefs = self.last("prefs")
        if not prefs.get("ok", True) or "replicas" not in prefs:
            raise DemoError(f"prefs failed: {prefs.get('error', prefs)}")
        return list(prefs["replicas"])

    def fallbacks(self) -> list[str]:
        self.replicas()  # the same check that prefs answered
        return list(self.last("prefs")["fallbacks"])


Text = str | Callable[[DemoContext], str]
Lines = Sequence[str] | Callable[[DemoContext], Sequence[str]]
Check = Callable[[DemoContext], str | None]  # None when met, else what happened instead


@dataclass(frozen=True)
class Expect:
    """What to look for, said as a sentence, and the check that it really happened."""

    what: str
    check: Check


@dataclass(frozen=True)
class Step:
    say: Text  # narration before the commands: what we do and what to look for
    run: Lines
    expect: tuple[Expect, ...] = ()
    then: Text | None = None  # said after the replies, once every expectation held
    # The lesson of some steps is the error itself (ALL with a replica down); in every other step
    # a failed command means the demo is broken, and the runner says so.
    failures_expected: bool = False


@dataclass(frozen=True)
class Demo:
    name: str
    title: str
    summary: str
    source: str  # where the course text teaches it
    options: ClusterOptions
    steps: tuple[Step, ...]


def text(value: Text, ctx: DemoContext) -> str:
    return value(ctx) if callable(value) else value


def lines(value: Lines, ctx: DemoContext) -> list[str]:
    return list(value(ctx) if callable(value) else value)


# --- small checks, shared by the demos ------------------------------------------------------------


def _show(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _same_values(got: list[Any], want: list[Any]) -> bool:
    return sorted(map(_show, got)) == sorted(map(_show, want))


def get_values(want: list[Any], index: int = -1) -> Check:
    """The step's get (by position) found exactly these values, as siblings, in any order."""

    def check(ctx: DemoContext) -> str | None:
        get = ctx.reply("get", index)
        if not get.get("ok"):
            return f"the get failed: {get.get('error')}"
        if not _same_values(get["values"], want):
            return f"the get returned {_show(get['values'])}"
        return None

    return check


def ok_with(cmd: str, index: int = -1, **fields: Any) -> Check:
    """The step's `cmd` reply succeeded and has these field values."""

    def check(ctx: DemoContext) -> str | None:
        reply = ctx.reply(cmd, index)
        if not reply.get("ok"):
            return f"{cmd} failed: {reply.get('error')}"
        wrong = {k: reply.get(k) for k, v in fields.items() if reply.get(k) != v}
        return f"{cmd} answered {wrong}" if wrong else None

    return check


def failed_saying(cmd: str, *phrases: str, index: int = -1) -> Check:
    """The step's `cmd` reply failed, and its sentence contains every phrase."""

    def check(ctx: DemoContext) -> str | None:
        reply = ctx.reply(cmd, index)
        if reply.get("ok"):
            return f"{cmd} succeeded"
        missing = [p for p in phrases if p not in reply.get("error", "")]
        return f"{cmd} failed with {reply.get('error')!r}" if missing else None

    return check


def replica_holds(node: Callable[[DemoContext], str], want: list[Any]) -> Check:
    """The step's `clock` reply shows exactly these live values on that node."""

    def check(ctx: DemoContext) -> str | None:
        clock = ctx.reply("clock")
        name = node(ctx)
        versions = clock.get("replicas", {}).get(name)
        if versions is None:
            return f"{name} is down or not a replica of the key"
        values = [v["value"] for v in versions if not v.get("tombstone")]
        return None if _same_values(values, want) else f"{name} holds {_show(values)}"

    return check


def all_replicas_equal(ctx: DemoContext) -> str | None:
    clock = ctx.reply("clock")
    odd = [f"{r['a']} {r['relation']} {r['b']}" for r in clock["relations"] if r["relation"] != "equal"]
    if None in clock["replicas"].values():
        return "a replica is down"
    return f"not every replica agrees: {', '.join(odd)}" if odd else None


def nth_replica(i: int) -> Callable[[DemoContext], str]:
    return lambda ctx: ctx.replicas()[i]


def prefs_shows_down(i: int) -> Check:
    """The step's `prefs` reply shows the key's i-th home replica down."""

    def check(ctx: DemoContext) -> str | None:
        name = ctx.replicas()[i]
        return None if ctx.reply("prefs")["up"].get(name) is False else f"prefs shows {name} up"

    return check


def prefs_sizes(replicas: int, fallbacks: int) -> Check:
    def check(ctx: DemoContext) -> str | None:
        got = (len(ctx.replicas()), len(ctx.fallbacks()))
        return None if got == (replicas, fallbacks) else f"prefs lists {got[0]} replicas, {got[1]} fallbacks"

    return check


def metric_at_least(name: str, least: int = 1) -> Check:
    """The step's `metrics` reply counts at least `least` of `name` (stale_reads, read_repairs)."""

    def check(ctx: DemoContext) -> str | None:
        got = ctx.reply("metrics")[name]
        return None if got >= least else f"the metrics show {name} = {got}"

    return check


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
    source="part 3 (versioning: vector clocks, siblings), seed/sims/part3-versions.js",
    options=ClusterOptions(nodes=3, zones=3),
    steps=(
        Step(
            "We have three nodes, A, B and C, and every key has three replicas. "
            "First we put rice into cart:42 through A, then read it back. "
            "Each version carries a vector clock; Bhandar uses a dotted version vector. "
            "Look at the dot A:1: coordinator A, its first write. "
            "The get also returns a context: the version vector of everything this read has seen.",
            ["put carts cart:42 '[\"rice\"]' via=A", "get carts cart:42"],
            (
                Expect("the get shows one value, rice", get_values([RICE])),
                Expect("its dot is A:1 and its clock {A:1}", _first_dot),
            ),
        ),
        Step(
            "Now we cut the network: A on one side, B and C on the other. "
            "We wait three seconds so that each node's failure detector notices. "
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
            "The partition heals. We wait three seconds until the nodes see each other again.",
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
                Expect("its clock is {A:2, B:1, C:1}, as in the course text", _merged_clock),
            ),
        ),
        Step(
            "One second later, every replica holds the merged cart with the same clock.",
            ["sleep 1s", "clock carts cart:42"],
            (Expect("every replica is equal", all_replicas_equal),),
            then="Compare with the course text: put via C, clock {A:2, B:1, C:1}.",
        ),
    ),
)


# --- 2. quorum: R + W > N ---------------------------------------------------------------------------

TEA, MILK = ["tea"], ["tea", "milk"]
ALL_FAILS = ("2 of 3", "ALL needs 3")  # the counts the error sentence must give


QUORUM = Demo(
    name="quorum",
    title="Quorums: R + W > N",
    summary="kill one of three replicas: QUORUM still works, ALL fails, ONE can read stale data",
    source="part 2 (replication: preference list, R and W), seed/sims/part2-quorum.js",
    options=ClusterOptions(nodes=3, zones=3),
    steps=(
        Step(
            "Every key has a preference list: the N = 3 nodes that hold its replicas, "
            "found by walking the ring clockwise from the key's token. "
            "Here is the preference list of cart:7. "
            "QUORUM means floor(3 / 2) + 1 = 2 replicas: W = 2 for a write, R = 2 for a read.",
            ["prefs carts cart:7"],
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
                "and wait three seconds for the others to notice. The preference list shows it down."
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
                f"We revive {ctx.replicas()[1]}. It missed the tea-and-milk write. "
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
                "metrics",
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


def _hints_delivered(ctx: DemoContext) -> str | None:
    hints = ctx.reply("metrics")["hints"]
    return None if hints["delivered"] == hints["stored"] > 0 else f"the hint metrics are {hints}"


def _home_holds(i: int, want: list[Any]) -> Check:
    return replica_holds(nth_replica(i), want)


HANDOFF = Demo(
    name="handoff",
    title="Sloppy quorum and hinted handoff",
    summary="home replicas down: fallbacks take the writes with hints and hand them back on return",
    source="part 4 (handling failures: sloppy quorum, hinted handoff), seed/sims/part4-ministore.js",
    options=ClusterOptions(nodes=5, zones=3),
    steps=(
        Step(
            "Five nodes now, and N = 3. The preference list of cart:7 has three home replicas, "
            "and after them the fallbacks: the next healthy nodes on the ring walk.",
            ["prefs carts cart:7"],
            (Expect("cart:7 has 3 home replicas and 2 fallbacks", prefs_sizes(3, 2)),),
        ),
        Step(
            lambda ctx: (
                f"We kill {ctx.replicas()[2]}, the third home replica, and wait three seconds "
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
        ),
        Step(
            "We revive both nodes and wait. When a holder sees the owner is back, it delivers "
            "its hints and drops them: this is hinted handoff. The hint queues are empty again.",
            lambda ctx: [f"revive {ctx.replicas()[1]}", f"revive {ctx.replicas()[2]}", "sleep 4s", "hints"],
            (Expect("no hints are pending", _no_hints),),
        ),
        Step(
            "The clock command shows all three home replicas holding tea and milk, "
            "although two of them were down when it was written. "
            "The metrics count the hints stored and delivered.",
            ["clock carts cart:7", "metrics"],
            (
                Expect("every home replica holds tea and milk", all_replicas_equal),
                Expect("the second home replica holds tea and milk", _home_holds(1, [MILK])),
                Expect("the third home replica holds tea and milk", _home_holds(2, [MILK])),
                Expect("every stored hint was delivered", _hints_delivered),
            ),
        ),
    ),
)


# --- 4. lww: last write wins drops a write ----------------------------------------------------------


def _one_survivor(ctx: DemoContext) -> str | None:
    get = ctx.reply("get")
    if not get.get("ok"):
        return f"the get failed: {get.get('error')}"
    return None if get["values"] in ([55], [60]) else f"the get returned {_show(get['values'])}"


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
    source="part 3 (the end: LWW instead of siblings), seed/sims/part3-versions.js",
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
    source="part 3 (CRDT: PN-Counter) and the idempotency key of part 2's API",
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


# --- 6. readrepair ----------------------------------------------------------------------------------


def _isolated_holds_nothing(ctx: DemoContext) -> str | None:
    name = ctx.replicas()[2]
    versions = ctx.reply("clock")["replicas"].get(name)
    return None if versions == [] else f"{name} holds {versions}"


READREPAIR = Demo(
    name="readrepair",
    title="Read repair: a read fixes a replica that missed a write",
    summary="a replica misses a write during a partition; the next read finds it stale and repairs it",
    source="part 4 (read repair) and part 8's stale-read SLI",
    options=ClusterOptions(nodes=3, zones=3),
    steps=(
        Step(
            "The preference list of cart:9: three replicas.",
            ["prefs carts cart:9"],
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
                "holds nothing: it missed the write."
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
            ["metrics"],
            (Expect("the metrics count a read repair", metric_at_least("read_repairs")),),
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
    source="part 2's API (delete is a write) and part 3 (tombstones)",
    options=ClusterOptions(nodes=3, zones=3),
    steps=(
        Step(
            "We write a value to all three replicas and read it, which gives us its context.",
            ["prefs carts cart:5", "put carts cart:5 '[\"ghee\"]' c=ALL", "get carts cart:5"],
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
                f"We revive {ctx.replicas()[2]}. It still holds ghee: it missed the delete. "
                "If the store had simply forgotten the key, this old copy could bring ghee back."
            ),
            lambda ctx: [f"revive {ctx.replicas()[2]}", "sleep 4s", "clock carts cart:5"],
            (Expect("the revived replica still holds ghee", _home_holds(2, [["ghee"]])),),
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


DEMOS: dict[str, Demo] = {d.name: d for d in (SIBLINGS, QUORUM, HANDOFF, LWW, COUNTER, READREPAIR, TOMBSTONE)}
