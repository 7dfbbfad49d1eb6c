"""broadcast and g-set: clients add elements and read the whole set; the set only grows.

broadcast: `topology` first (each node's neighbours, a grid as in Maelstrom), then `broadcast`
{message} -> `broadcast_ok` and `read` -> `read_ok` {messages}. g-set: `add` {element} ->
`add_ok` and `read` -> `read_ok` {value}. Elements are distinct integers.

Checker: after the heal, every node's final read holds every acknowledged element (none lost);
no read ever holds an element nobody added, or one whose add failed definitely (nothing
invented). Reads during the run may lag: they are counted as stale and drawn as the staleness
curve, not judged. A node whose final reads all went unanswered leaves the verdict unknown.
"""

from __future__ import annotations

import json
import math
from random import Random
from typing import Any

from bhandar_cli.check.catalog import WORKLOADS
from bhandar_cli.check.maelstrom_history import (
    UNKNOWN,
    MaelstromHistory,
    MaelstromOperation,
    Problem,
    Verdict,
    judged,
)
from bhandar_cli.check.maelstrom_workload import BadAnswer, MaelstromWorkload, named, outcome, require
from bhandar_cli.check.staleness import MAX_SAMPLES, curve

SHOWN = 5  # elements named per problem


def grid(nodes: list[str]) -> dict[str, list[str]]:
    """Nodes on a square grid, each with its up to four neighbours."""
    side = math.ceil(math.sqrt(len(nodes))) or 1

    def at(i: int, j: int) -> str | None:
        k = i * side + j
        return nodes[k] if 0 <= i < side and 0 <= j < side and k < len(nodes) else None

    out: dict[str, list[str]] = {}
    for k, node in enumerate(nodes):
        i, j = divmod(k, side)
        out[node] = [n for n in (at(i + 1, j), at(i - 1, j), at(i, j + 1), at(i, j - 1)) if n]
    return out


class SetWorkload(MaelstromWorkload):
    add = "add"  # the name of the add operation
    field = "element"  # the field of the add request
    read_field = "value"  # the field of read_ok

    def next_op(self, rng: Random, client: int) -> tuple[str, Any]:
        return (self.add, self.unique()) if rng.random() < 0.5 else ("read", None)

    def request(self, f: str, value: Any) -> dict[str, Any]:
        return {"type": f, self.field: value} if f == self.add else {"type": "read"}

    def parse(self, f: str, body: dict[str, Any]) -> Any:
        if f != "read":
            return None
        items = require(body, self.read_field, (list,))
        try:
            return frozenset(json.dumps(x, sort_keys=True) for x in items)
        except TypeError as exc:  # pragma: no cover - json values always dump
            raise BadAnswer(str(exc)) from None

    def finals(self) -> list[tuple[str, str, Any]]:
        return [(node, "read", None) for node in self.nodes]

    def show(self, op: MaelstromOperation) -> str:
        if op.f == self.add:
            return f"{self.add} {op.value} -> {outcome(op)}"
        return f"read -> {len(op.result)} elements" if op.ok else f"read -> {outcome(op)}"

    def check(self, history: MaelstromHistory) -> Verdict:
        adds = [op for op in history.ops if op.f == self.add]
        added = {json.dumps(op.value): op for op in adds}
        acked = {json.dumps(op.value): op for op in adds if op.ok}
        failed = {json.dumps(op.value): op for op in adds if op.type == "fail"}
        reads = [op for op in history.ops if op.f == "read"]
        problems: list[Problem] = []
        invented: set[str] = set()
        for read in reads:
            if not read.ok:
                continue
            for element in sorted(read.result - invented):
                if element not in added or element in failed:
                    invented.add(element)
                    why = (
                        "nobody added it"
                        if element not in added
                        else (f"its {named(failed[element], self.show(failed[element]))} failed definitely")
                    )
                    problems.append(
                        Problem(
                            "invented", f"{named(read, 'read')} returned {element}, but {why}.", (read.index,)
                        )
                    )
        finals = [op for op in reads if op.final]
        answered = [op for op in finals if op.ok]
        lost: set[str] = set()
        for read in answered:
            missing = [e for e in acked if e not in read.result]
            lost.update(missing)
            if missing:
                shown = "; ".join(named(acked[e], self.show(acked[e])) for e in missing[:SHOWN])
                more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
                problems.append(
                    Problem(
                        "lost",
                        f"{len(missing)} acknowledged element(s) missing from {read.node}'s "
                        f"{named(read, 'read')} after the heal: {shown}{more}.",
                        (read.index, *(acked[e].index for e in missing[:SHOWN])),
                    )
                )
        points, worst = curve(self._samples(reads, acked))
        stats = {
            "acknowledged": len(acked),
            "attempted": len(adds),
            "reads": sum(1 for r in reads if r.ok and not r.final),
            "lost": len(lost),
            "stale_reads": self._stale(reads, acked),
            "final_reads": f"{len(answered)}/{len(finals)}",
            "latest_miss_ms": round(worst, 1),
        }
        if not problems:
            silent = sorted({op.node for op in finals} - {op.node for op in answered})
            if silent or not finals:
                why = (
                    f"{', '.join(silent)} answered none of its final reads"
                    if silent
                    else "no final read was made"
                )
                summary = f"Cannot tell whether every acknowledged element reached every node: {why}."
                return Verdict(UNKNOWN, summary, (), stats, points)
        checked = (
            f"Every one of the {len(acked)} acknowledged elements was in all {len(answered)} final reads, "
            "and no read returned an element nobody added."
        )
        return judged(problems, checked, stats, staleness=points)

    @staticmethod
    def _pairs(
        reads: list[MaelstromOperation], acked: dict[str, MaelstromOperation]
    ) -> list[tuple[MaelstromOperation, list[tuple[float, str]]]]:
        by_ack = sorted((op.completed, e) for e, op in acked.items())
        live = [r for r in reads if r.ok and not r.final]
        if live and len(live) * len(by_ack) > MAX_SAMPLES:
            step = len(live) * len(by_ack) / MAX_SAMPLES
            live = [live[int(i * step)] for i in range(int(len(live) / step))]
        return [(r, [(t, e) for t, e in by_ack if t < r.invoked]) for r in live]

    def _samples(
        self, reads: list[MaelstromOperation], acked: dict[str, MaelstromOperation]
    ) -> list[tuple[float, bool]]:
        return [(r.invoked - t, e in r.result) for r, before in self._pairs(reads, acked) for t, e in before]

    def _stale(self, reads: list[MaelstromOperation], acked: dict[str, MaelstromOperation]) -> int:
        return sum(1 for r, before in self._pairs(reads, acked) if any(e not in r.result for _, e in before))


class Broadcast(SetWorkload):
    name = "broadcast"
    doc = WORKLOADS[name]
    add = "broadcast"
    field = "message"
    read_field = "messages"

    def setup(self) -> list[tuple[str, dict[str, Any]]]:
        topology = grid(self.nodes)
        return [(node, {"type": "topology", "topology": topology}) for node in self.nodes]


class GSet(SetWorkload):
    name = "g-set"
    doc = WORKLOADS[name]
