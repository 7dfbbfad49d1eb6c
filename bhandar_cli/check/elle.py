"""Transactional anomalies inferred from what clients saw, after Elle (Kingsbury & Alvaro, "Elle:
inferring isolation anomalies from experimental observations"): this module owns the dependency
graph of a transactional history, the search for its cycles, and which anomalies each consistency
model prohibits (check/dependencies.py reads the dependencies off txn-list-append and
txn-rw-register histories). Pure: transactions in, anomalies out.

Dependencies between committed transactions (Adya's):
- ww: T1 installed a version of a key and T2 the next one;
- wr: T2 read a version T1 installed;
- rw: T1 read a version and T2 installed the next one (an anti-dependency);
- rt: T1 completed before T2 began (real time, for the strict models).
A quoted edge says why in a few words: ww `key 1: 1 then 2` (T2's version of key 1 came right
after T1's), wr `key 1: read 1` (T2 read T1's version), rw `key 1: read 1, missed 2` (T1 read the
version before T2's).

Anomalies (a cycle is quoted transaction by transaction, with each edge's kind and why):
- G0: a cycle of ww edges; G1c: a cycle of ww and wr edges (at least one wr);
- G-single: a cycle with exactly one rw edge; G-nonadjacent: several rw edges, never two in a
  row; G2: other cycles with rw edges; each with `-realtime` when it needs an rt edge;
- G1a: a read of a write whose transaction failed; G1b: a read of a version a transaction
  overwrote itself before it committed (an intermediate one);
- internal: a transaction's read disagrees with its own earlier reads and writes;
- incompatible-order: two reads of a list that are not one the other's prefix;
- duplicate-elements: a list read holding an element twice; garbage-read: a value nobody wrote.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bhandar_cli.check.catalog import CONSISTENCY_MODELS

Mop = tuple[str, Any, Any]  # (f, key, value): a micro-operation

# What each model prohibits, as Elle's consistency-model graph has it for the anomalies this
# module finds. Every model prohibits a read of a value nobody wrote (nothing may be invented).
_READ_UNCOMMITTED = frozenset({"G0", "duplicate-elements", "garbage-read"})
_READ_COMMITTED = _READ_UNCOMMITTED | {"G1a", "G1b", "G1c", "incompatible-order"}
_SERIALIZABLE = _READ_COMMITTED | {"internal", "G-single", "G-nonadjacent", "G2"}
PROHIBITED: dict[str, frozenset[str]] = {
    "read-uncommitted": _READ_UNCOMMITTED,
    "read-committed": _READ_COMMITTED,
    "read-atomic": _READ_COMMITTED | {"internal"},
    "repeatable-read": _READ_COMMITTED | {"G-single", "G-nonadjacent", "G2"},
    "snapshot-isolation": _READ_COMMITTED | {"internal", "G-single", "G-nonadjacent"},
    "serializable": _SERIALIZABLE,
    "strict-serializable": _SERIALIZABLE
    | {"G0-realtime", "G1c-realtime", "G-single-realtime", "G-nonadjacent-realtime", "G2-realtime"},
}
assert tuple(PROHIBITED) == CONSISTENCY_MODELS

# The order anomalies are searched and reported in: the most severe (least allowed) first.
ORDER = (
    "garbage-read",
    "duplicate-elements",
    "incompatible-order",
    "internal",
    "G1a",
    "G1b",
    "G0",
    "G1c",
    "G-single",
    "G-nonadjacent",
    "G2",
    "G0-realtime",
    "G1c-realtime",
    "G-single-realtime",
    "G-nonadjacent-realtime",
    "G2-realtime",
)
MEANING = {
    "garbage-read": "a read of a value nobody wrote",
    "duplicate-elements": "a list read holding an element twice",
    "incompatible-order": "two reads of a list, neither a prefix of the other",
    "internal": "a transaction's read disagreeing with its own earlier reads and writes",
    "G1a": "aborted read: a read of a write whose transaction failed",
    "G1b": "intermediate read: a read of a version its writer overwrote before committing",
    "G0": "write cycle: transactions overwriting each other in a cycle",
    "G1c": "circular information flow: a cycle of writes and reads",
    "G-single": "read skew: a cycle with exactly one anti-dependency (rw)",
    "G-nonadjacent": "a cycle of anti-dependencies (rw), never two in a row",
    "G2": "anti-dependency cycle (write skew, lost update)",
}
CYCLE_BUDGET = 2_000_000  # edges a search may visit in all before it gives up (verdict unknown)
PER_KIND = 5  # cycles quoted per kind of anomaly


def prohibited(models: Iterable[str]) -> frozenset[str]:
    """Every anomaly at least one of `models` prohibits."""
    out: frozenset[str] = frozenset()
    for model in models:
        out |= PROHIBITED[model]
    return out


def meaning(kind: str) -> str:
    if kind.endswith("-realtime"):
        return f"{MEANING[kind.removesuffix('-realtime')]}, closed by real-time order"
    return MEANING[kind]


@dataclass(frozen=True, slots=True)
class Txn:
    """One transaction as the history holds it: `mops` as completed (ok) or as asked."""

    id: int  # the operation's index in the history
    status: str  # ok | fail | info
    mops: tuple[Mop, ...]
    invoked: float = 0.0
    completed: float = float("inf")


@dataclass(frozen=True, slots=True)
class CycleEdge:
    """One edge of a quoted cycle: `src` -kind-> `dst`, and why."""

    src: int
    kind: str  # ww | wr | rw | rt
    dst: int
    why: str


@dataclass(frozen=True, slots=True)
class Anomaly:
    kind: str
    txns: tuple[int, ...]  # the transactions involved, by history index
    text: str  # what happened, naming transactions as #index
    cycle: tuple[CycleEdge, ...] = ()


@dataclass
class Analysis:
    anomalies: list[Anomaly] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # anomalies of each kind (cycles: found)
    edges: dict[str, int] = field(default_factory=dict)  # dependency edges by kind
    cut_short: bool = False  # the cycle search ran out of budget

    def add(self, anomaly: Anomaly) -> None:
        self.counts[anomaly.kind] = self.counts.get(anomaly.kind, 0) + 1
        if self.counts[anomaly.kind] <= PER_KIND:
            self.anomalies.append(anomaly)


class Graph:
    """Dependency edges between transactions, each kind with its first reason."""

    def __init__(self) -> None:
        self.out: dict[int, dict[int, dict[str, str]]] = {}

    def link(self, src: int, kind: str, dst: int, why: str) -> None:
        if src != dst:
            self.out.setdefault(src, {}).setdefault(dst, {}).setdefault(kind, why)

    def count(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for targets in self.out.values():
            for kinds in targets.values():
                for kind in kinds:
                    out[kind] = out.get(kind, 0) + 1
        return out

    def edges(self, kind: str) -> list[tuple[int, int]]:
        return [(s, d) for s, targets in self.out.items() for d, kinds in targets.items() if kind in kinds]

    def components(self, kinds: frozenset[str]) -> dict[int, int]:
        """Each transaction's strongly connected component over edges of `kinds` (Tarjan,
        iterative: a history's graph can be deeper than Python's stack)."""
        index: dict[int, int] = {}
        low: dict[int, int] = {}
        comp: dict[int, int] = {}
        stack: list[int] = []
        on_stack: set[int] = set()
        counter = 0
        for root in list(self.out):
            if root in index:
                continue
            work: list[tuple[int, Iterator[int]]] = []
            index[root] = low[root] = counter
            counter += 1
            stack.append(root)
            on_stack.add(root)
            work.append((root, iter(self._next(root, kinds))))
            while work:
                node, targets = work[-1]
                advanced = False
                for nxt in targets:
                    if nxt not in index:
                        index[nxt] = low[nxt] = counter
                        counter += 1
                        stack.append(nxt)
                        on_stack.add(nxt)
                        work.append((nxt, iter(self._next(nxt, kinds))))
                        advanced = True
                        break
                    if nxt in on_stack:
                        low[node] = min(low[node], index[nxt])
                if advanced:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        comp[member] = index[node]
                        if member == node:
                            break
        return comp

    def _next(self, node: int, kinds: frozenset[str]) -> list[int]:
        return [d for d, ks in self.out.get(node, {}).items() if not kinds.isdisjoint(ks)]


class _Search:
    """Shortest paths over chosen edge kinds, within one budget for the whole history."""

    def __init__(self, graph: Graph, budget: int) -> None:
        self.graph = graph
        self.budget = budget

    def path(self, start: int, goal: int, kinds: frozenset[str], within: set[int]) -> list[CycleEdge] | None:
        """The shortest path start -> goal over `kinds` inside `within`, or None."""
        if start == goal:
            return []
        parent: dict[int, tuple[int, str]] = {start: (start, "")}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for nxt, ks in self.graph.out.get(node, {}).items():
                self.budget -= 1
                if nxt in parent or nxt not in within:
                    continue
                kind = next((k for k in ("ww", "wr", "rw", "rt") if k in ks and k in kinds), None)
                if kind is None:
                    continue
                parent[nxt] = (node, kind)
                if nxt == goal:
                    steps: list[CycleEdge] = []
                    at = goal
                    while at != start:
                        prev, k = parent[at]
                        steps.append(CycleEdge(prev, k, at, self.graph.out[prev][at][k]))
                        at = prev
                    return steps[::-1]
                queue.append(nxt)
            if self.budget < 0:
                return None
        return None


WW_WR = frozenset({"ww", "wr"})
NO_RT = frozenset({"ww", "wr", "rw"})
ALL = frozenset({"ww", "wr", "rw", "rt"})


def _classify(steps: Sequence[CycleEdge]) -> str:
    kinds = [s.kind for s in steps]
    rws = [i for i, k in enumerate(kinds) if k == "rw"]
    if len(rws) == 0:
        base = "G1c" if "wr" in kinds else "G0"
    elif len(rws) == 1:
        base = "G-single"
    else:
        n = len(kinds)
        adjacent = any((i + 1) % n in rws for i in rws)
        base = "G2" if adjacent else "G-nonadjacent"
    return f"{base}-realtime" if "rt" in kinds else base


def _quote(steps: Sequence[CycleEdge]) -> str:
    parts = [f"#{steps[0].src}"]
    for step in steps:
        parts.append(f"-{step.kind} ({step.why})-> #{step.dst}")
    return " ".join(parts)


def find_cycles(graph: Graph, analysis: Analysis, realtime: bool) -> None:
    """The cycles of `graph`, each kind searched over the edges that can make it (G0 over ww,
    G1c over ww and wr, G-single and G2 closing an rw edge, the realtime ones an rt edge), one
    cycle per starting edge and no two over the same transactions."""
    search = _Search(graph, CYCLE_BUDGET)
    seen: set[frozenset[int]] = set()
    plans: list[tuple[str, frozenset[str], frozenset[str]]] = [
        ("ww", frozenset({"ww"}), frozenset({"ww"})),
        ("wr", WW_WR, WW_WR),
        ("rw", WW_WR, NO_RT),  # one rw edge closed by ww/wr: G-single
        ("rw", NO_RT, NO_RT),  # any other: G-nonadjacent or G2
    ]
    if realtime:
        plans.append(("rt", ALL, ALL))
    for first, kinds, scope in plans:
        comp = graph.components(scope)
        members: dict[int, set[int]] = {}
        for t, c in comp.items():
            members.setdefault(c, set()).add(t)
        for src, dst in graph.edges(first):
            if comp.get(src) is None or comp.get(src) != comp.get(dst):
                continue
            back = search.path(dst, src, kinds, members[comp[src]])
            if search.budget < 0:
                analysis.cut_short = True
                return
            if back is None:
                continue
            steps = [CycleEdge(src, first, dst, graph.out[src][dst][first]), *back]
            involved = frozenset(s.src for s in steps)
            if involved in seen:
                continue
            seen.add(involved)
            kind = _classify(steps)
            txns = tuple(s.src for s in steps)
            analysis.add(Anomaly(kind, txns, _quote(steps), tuple(steps)))


def realtime_edges(graph: Graph, txns: Sequence[Txn]) -> None:
    """rt edges, reduced: each transaction gets one from every transaction that completed before
    it began and is not already followed by another such (the rest follow by transitivity)."""
    events: list[tuple[float, int, int]] = []
    for t in txns:
        if t.status in ("ok", "info"):
            events.append((t.invoked, 0, t.id))
        if t.status == "ok":
            events.append((t.completed, 1, t.id))
    frontier: set[int] = set()
    before: dict[int, set[int]] = {}
    for _, completing, tid in sorted(events):
        if completing:
            frontier -= before.get(tid, set())
            frontier.add(tid)
        else:
            before[tid] = set(frontier)
            for prev in frontier:
                graph.link(prev, "rt", tid, "completed before it began")


def analyse(graph: Graph, analysis: Analysis, txns: Sequence[Txn], realtime: bool) -> Analysis:
    if realtime:
        realtime_edges(graph, txns)
    analysis.edges = graph.count()
    find_cycles(graph, analysis, realtime)
    rank = {k: i for i, k in enumerate(ORDER)}
    analysis.anomalies.sort(key=lambda a: rank.get(a.kind, len(ORDER)))
    return analysis
