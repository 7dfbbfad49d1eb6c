"""Demos about membership: a node joins (it streams the keys of the ranges it will replicate) and leaves."""

from __future__ import annotations

from bhandar_cli.client import ClusterOptions
from bhandar_cli.core.membership import key_token
from bhandar_cli.teach.demo_kit import Demo, DemoContext, Expect, Json, Step

KEYS = 30


def _bootstrapped(ctx: DemoContext) -> str | None:
    add = ctx.reply("add")
    if not add.get("ok"):
        return f"add failed: {add.get('error')}"
    return None if add["keys_streamed"] > 0 else "E received no records while bootstrapping"


def _e_owns_a_share(ctx: DemoContext) -> str | None:
    nodes = {n["id"]: n for n in ctx.reply("status")["nodes"]}
    e = nodes.get("E")
    if e is None or e["code"] != "UN":
        return "E is not up and normal in the status"
    return None if 0.05 < e["owns"] < 0.45 else f"E owns {100 * e['owns']:.1f}% of the ring"


def _every_key_readable(ctx: DemoContext) -> str | None:
    gets = [r for r in ctx.step if r.get("cmd") == "get"]
    missing = [str(r.get("key")) for r in gets if not r.get("found")]
    if len(gets) != KEYS:
        return f"{len(gets)} reads answered out of {KEYS}"
    return None if not missing else f"not found at ALL: {', '.join(missing)}"


def _e_gone(ctx: DemoContext) -> str | None:
    leave = ctx.reply("decommission")
    if not leave.get("ok"):
        return f"decommission failed: {leave.get('error')}"
    ids = [n["id"] for n in ctx.reply("status")["nodes"]]
    return None if "E" not in ids else "E is still in the status"


def _copies(status: Json) -> dict[str, int]:
    """The copies each node holds, as `status` counts them (its keys column)."""
    return {n["id"]: n["keys"] for n in status["nodes"]}


def _before_join(ctx: DemoContext) -> dict[str, int]:
    """The copies of A to D in the last status before E was added (step 2's, once every key had
    its N copies)."""
    before: Json | None = None
    for _, reply in ctx.history:
        if reply.get("cmd") == "add":
            break
        if reply.get("cmd") == "status":
            before = reply
    assert before is not None, "step 2 runs status before step 3 adds E"
    return _copies(before)


def _dropped(ctx: DemoContext) -> int:
    now = _copies(ctx.last("status"))
    return sum(held - now.get(node, 0) for node, held in _before_join(ctx).items())


def _copied(ctx: DemoContext) -> str:
    """Step 3's conclusion: E has copies; whether the old ones are gone is counted, not assumed."""
    now = _copies(ctx.last("status"))
    e = next(n for n in ctx.last("status")["nodes"] if n["id"] == "E")
    add = ctx.last("add")
    dropped = _dropped(ctx)
    old = (
        f"A to D have dropped {dropped} of theirs so far"
        if dropped
        else "A to D still hold theirs (copied, not moved yet)"
    )
    return (
        f"E owns {100 * e['owns']:.1f}% of the ring (first replica of its ranges), and E holds copies "
        f"of {now['E']} keys, copied from the keys' current replicas ({add['keys_streamed']} records "
        f"received: each of a key's replicas sends its copy). {old}; status counts {sum(now.values())} "
        f"copies of {KEYS} keys, where N = 3 needs {3 * KEYS}. An old replica drops its copy once every "
        "new replica has acknowledged it and the ring has stood still long enough for every node to "
        "hear of E: until then a coordinator that has not heard of E still reads from it."
    )


def _n_copies_of_each_key(ctx: DemoContext) -> str | None:
    """Does status count N = 3 copies of every key, no more, no fewer?"""
    total = sum(_copies(ctx.reply("status")).values())
    return None if total == 3 * KEYS else f"status counts {total} copies"


def _moved(ctx: DemoContext) -> str:
    """Step 4's conclusion, once the old replicas dropped what E took over: what moved."""
    status = ctx.last("status")["nodes"]
    now = _copies(ctx.last("status"))
    total = sum(now.values())
    dropped = _dropped(ctx)
    naive = _naive_moves([n["id"] for n in status if n["id"] != "E"], "E")
    if dropped == now["E"]:
        moved = (
            f"{now['E']} of the {total} copies ({100 * now['E'] / total:.0f}%) moved to E: copied to E, "
            "then dropped by the nodes that no longer replicate them. Every other copy stayed where it was."
        )
    else:
        moved = f"E holds copies of {now['E']} keys, and A to D dropped {dropped} copies."
    return (
        f"status counts {total} copies of {KEYS} keys. {moved} Placing the same keys by hash mod N "
        f"(three consecutive nodes of {len(status) - 1}, then of {len(status)}) would have moved "
        f"{naive} of the {3 * KEYS} copies ({100 * naive / (3 * KEYS):.0f}%)."
    )


def _naive_moves(before: list[str], joining: str) -> int:
    """Copies of the demo's keys that would change node if each key's three replicas were the
    nodes numbered hash mod N, +1, +2, with N the number of nodes before and after the join."""
    after = [*before, joining]
    moved = 0
    for i in range(KEYS):
        h = key_token("kv", f"k{i}")
        old = {before[(h + r) % len(before)] for r in range(3)}
        new = {after[(h + r) % len(after)] for r in range(3)}
        moved += len(new - old)
    return moved


JOIN = Demo(
    name="join",
    title="A node joins, then leaves: bootstrap, pending ranges, decommission",
    summary="a fifth node joins: it streams the keys of its ranges, and every key stays readable",
    guide="docs/membership-and-anti-entropy.md",
    options=ClusterOptions(nodes=4, zones=2),
    steps=(
        Step(
            f"Four nodes, A to D. We write {KEYS} keys at QUORUM.",
            [f"put kv k{i} {i}" for i in range(KEYS)],
        ),
        Step(
            "status shows how the ring is shared among the four. A QUORUM write is answered once two "
            "replicas hold it; the third copy may land a moment later, so we look until all are there.",
            ["status"],
            until=Expect(f"every key has its 3 copies: {3 * KEYS} in all", _n_copies_of_each_key),
            within=10.0,
            poll=0.1,
        ),
        Step(
            "We add node E. It takes its tokens, announces itself joining by gossip, and from then on "
            "coordinators send it the writes of the ranges it will own (pending ranges). It streams "
            "those ranges from the current replicas, then announces itself normal.",
            ["add E", "status"],
            (
                Expect("E bootstrapped some records", _bootstrapped),
                Expect("E is up, normal, and owns a share of the ring", _e_owns_a_share),
            ),
            then=_copied,
        ),
        Step(
            "We wait for A to D to drop the copies E now holds, looking at status every second.",
            ["status"],
            until=Expect(
                f"A to D dropped the copies E took over: {3 * KEYS} copies in all", _n_copies_of_each_key
            ),
            within=60.0,
            then=_moved,
        ),
        Step(
            "Every key is still there: we read all of them at c=ALL, from the new replica sets.",
            [f"get kv k{i} c=ALL" for i in range(KEYS)],
            (Expect(f"all {KEYS} keys are found at ALL", _every_key_readable),),
        ),
        Step(
            "Now E leaves. Decommission: E announces leaving, streams every record it holds to the "
            "replicas each key will have without it, waits for every batch to be acknowledged, "
            "and announces left.",
            ["decommission E", "status"],
            (Expect("E left the ring", _e_gone),),
        ),
        Step(
            "And every key is still there.",
            [f"get kv k{i} c=ALL" for i in range(KEYS)],
            (Expect(f"all {KEYS} keys are found at ALL", _every_key_readable),),
            then="No acknowledged write was lost while the ring changed twice.",
        ),
    ),
)
