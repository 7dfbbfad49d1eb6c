"""The versions teaching simulation, ported exactly from its JavaScript original:
the cart:42 story with vector clocks.

Three replicas A, B, C; a write through A, a partition {A} | {B, C} with a write on each side,
anti-entropy after healing leaves two concurrent siblings, a read through C returns both with
their joined context, the client merges the carts and writes back through C, and the replicas
converge whatever the delivery order. Last-writer-wins is shown dropping one cart.

This is the seed's own bare vector-clock model, kept as the teaching reference; the store's
versioning (dotted version vectors) lives in `core/` and is not used here on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bhandar_cli.core.model import Mulberry32
from bhandar_cli.sim.seeds.seed_js import js_json_stringify, js_number_to_string, js_string_sort_key

REPLICAS: tuple[str, ...] = ("A", "B", "C")
ORDER_SEED = 2026
Clock = dict[str, int]


def show(c: Clock) -> str:
    """`{A:1, B:1}`: entries in JavaScript's default string order."""
    keys = sorted(c, key=js_string_sort_key)
    return "{" + ", ".join(f"{k}:{js_number_to_string(c[k])}" for k in keys) + "}"


def leq(a: Clock, b: Clock) -> bool:
    """a happened before or equals b."""
    return all(a[k] <= b.get(k, 0) for k in a)


def join(clocks: list[Clock]) -> Clock:
    out: Clock = {}
    for c in clocks:
        for k, v in c.items():
            out[k] = max(out.get(k, 0), v)
    return out


@dataclass
class ClockedVersion:
    clock: Clock
    items: list[str]
    ts: str | None = None


@dataclass
class Replicas:
    """Each replica keeps a list of versions (siblings)."""

    versions: dict[str, list[ClockedVersion]] = field(default_factory=lambda: {n: [] for n in REPLICAS})

    def apply(self, node: str, ver: ClockedVersion) -> None:
        """Keep only versions not dominated by another; clocks are compared by their text."""
        merged = [*self.versions[node], ver]
        seen: set[str] = set()
        unique = []
        for x in merged:  # first occurrence of each clock wins, as the seed's findIndex filter
            if show(x.clock) not in seen:
                seen.add(show(x.clock))
                unique.append(x)
        self.versions[node] = [
            x
            for x in unique
            if not any(
                y is not x and leq(x.clock, y.clock) and show(x.clock) != show(y.clock) for y in unique
            )
        ]

    def snapshot(self) -> dict[str, list[Clock]]:
        return {n: [dict(v.clock) for v in self.versions[n]] for n in REPLICAS}


# The story as a list of steps; each renders to one or more of the seed's lines.


@dataclass(frozen=True)
class Put:
    via: str
    items: list[str]
    clock: Clock
    to: list[str]


@dataclass(frozen=True)
class State:
    replicas: dict[str, list[Clock]]


@dataclass(frozen=True)
class StoryNote:
    text: str


@dataclass(frozen=True)
class Compare:
    a: str
    b: str
    relation: str  # "a <= b", "b <= a" or "concurrent"


@dataclass(frozen=True)
class Get:
    via: str
    siblings: int
    context: Clock
    merged: list[str]


@dataclass(frozen=True)
class Delivered:
    order: list[str]
    replicas: dict[str, list[Clock]]


@dataclass(frozen=True)
class Lww:
    ts_a: str
    ts_b: str
    kept: list[str]
    dropped: list[str]


Step = Put | State | StoryNote | Compare | Get | Delivered | Lww


@dataclass(frozen=True)
class VersionsResult:
    steps: tuple[Step, ...]


def simulate_versions() -> VersionsResult:
    """Run part 3 (it has no parameters: the story is fixed)."""
    store = Replicas()
    steps: list[Step] = []

    def put(coord: str, context: Clock, items: list[str], to: list[str]) -> ClockedVersion:
        c = dict(context)
        c[coord] = c.get(coord, 0) + 1  # the coordinator bumps its own entry
        ver = ClockedVersion(c, items)
        for n in to:
            store.apply(n, ver)
        steps.append(Put(coord, list(items), dict(c), list(to)))
        return ver

    v1 = put("A", {}, ["rice"], ["A", "B", "C"])
    steps.append(State(store.snapshot()))
    steps.append(StoryNote("partition: {A} | {B, C}; both sides keep taking writes"))
    v2 = put("A", v1.clock, ["rice", "oil"], ["A"])
    v3 = put("B", v1.clock, ["rice", "salt"], ["B", "C"])
    steps.append(State(store.snapshot()))
    steps.append(StoryNote("partition heals; anti-entropy copies versions both ways"))
    for n in REPLICAS:
        store.apply(n, v2)
        store.apply(n, v3)
    steps.append(State(store.snapshot()))
    relation = "a <= b" if leq(v2.clock, v3.clock) else "b <= a" if leq(v3.clock, v2.clock) else "concurrent"
    steps.append(Compare("v2", "v3", relation))
    got = list(store.versions["C"])
    context = join([v.clock for v in got])
    # `[...new Set(items)].sort()`: first-seen order deduplicated, then JavaScript's string order.
    merged = sorted(dict.fromkeys(i for v in got for i in v.items), key=js_string_sort_key)
    steps.append(Get("C", len(got), context, merged))
    rnd = Mulberry32(ORDER_SEED)
    draws = [(rnd(), n) for n in REPLICAS]
    order = [n for _, n in sorted(draws, key=lambda x: x[0])]
    put("C", context, merged, order)
    steps.append(Delivered(order, store.snapshot()))
    # Wall-clock stamps from two different nodes; the string comparison is the seed's.
    v2.ts, v3.ts = "10:00:05", "10:00:07"
    lww, lost = (v2, v3) if v2.ts > v3.ts else (v3, v2)
    steps.append(Lww(v2.ts, v3.ts, list(lww.items), list(lost.items)))
    return VersionsResult(tuple(steps))


def _state_text(replicas: dict[str, list[Clock]]) -> str:
    return "  ".join(n + "=" + " & ".join(show(c) for c in replicas[n]) for n in REPLICAS)


def _render_step(step: Step) -> str:
    match step:
        case Put(via, items, clock, _):
            return f"put via {via} {js_json_stringify(items)} clock {show(clock)}"
        case State(replicas):
            return "  " + _state_text(replicas)
        case StoryNote(text):
            return "-- " + text
        case Compare(a, b, relation):
            shown = {"a <= b": f"{a} <= {b}", "b <= a": f"{b} <= {a}"}.get(relation, "concurrent -> siblings")
            return f"  {a} vs {b}: {shown}"
        case Get(via, siblings, context, merged):
            return (
                f"get via {via} -> {js_number_to_string(siblings)} siblings, context {show(context)}, "
                f"client merges to {js_json_stringify(merged)}"
            )
        case Delivered(order, replicas):
            return f"  delivered in order {','.join(order)}  " + _state_text(replicas)
        case Lww(ts_a, ts_b, kept, dropped):
            return (
                f"LWW instead ({ts_a} vs {ts_b}): keeps {js_json_stringify(kept)}, "
                f"silently drops {js_json_stringify(dropped)}"
            )
    raise TypeError(f"unknown step {step!r}")


def render_versions(result: VersionsResult) -> str:
    """The seed's story, byte for byte."""
    return "".join(_render_step(s) + "\n" for s in result.steps)


def _clock_json(c: Clock) -> dict[str, int]:
    return {k: c[k] for k in sorted(c, key=js_string_sort_key)}


def _replicas_json(replicas: dict[str, list[Clock]]) -> dict[str, list[dict[str, int]]]:
    return {n: [_clock_json(c) for c in replicas[n]] for n in REPLICAS}


def _step_json(step: Step) -> dict[str, Any]:
    match step:
        case Put(via, items, clock, to):
            return {"step": "put", "via": via, "items": items, "clock": _clock_json(clock), "to": to}
        case State(replicas):
            return {"step": "state", "replicas": _replicas_json(replicas)}
        case StoryNote(text):
            return {"step": "note", "text": text}
        case Compare(a, b, relation):
            return {"step": "compare", "a": a, "b": b, "relation": relation}
        case Get(via, siblings, context, merged):
            return {
                "step": "get",
                "via": via,
                "siblings": siblings,
                "context": _clock_json(context),
                "merged": merged,
            }
        case Delivered(order, replicas):
            return {"step": "delivered", "order": order, "replicas": _replicas_json(replicas)}
        case Lww(ts_a, ts_b, kept, dropped):
            return {"step": "lww", "timestamps": [ts_a, ts_b], "kept": kept, "dropped": dropped}
    raise TypeError(f"unknown step {step!r}")


def versions_json(result: VersionsResult) -> dict[str, Any]:
    """Every step of the story as data: clocks as objects, replica states as lists of clocks."""
    return {"cmd": "sim versions", "ok": True, "steps": [_step_json(s) for s in result.steps]}
