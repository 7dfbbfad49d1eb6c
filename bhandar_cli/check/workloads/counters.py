"""g-counter and pn-counter: `add` {delta} -> `add_ok`, `read` -> `read_ok` {value}.

g-counter adds only non-negative deltas; pn-counter any. Checker: after the heal, each node's
final read equals the sum of the acknowledged adds plus some subset of the indefinite ones
(an add that timed out may or may not have counted; one that failed definitely must not).
The set of possible sums is computed exactly while it stays small and as its bounding interval
past that (a superset: never a false alarm). Reads during the run are not judged. A node whose
final reads all went unanswered leaves the verdict unknown.
"""

from __future__ import annotations

from collections import Counter as Tally
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
from bhandar_cli.check.maelstrom_workload import MaelstromWorkload, named, outcome, require

EXACT_SUMS = 1_000_000  # widest span of sums listed one by one; past this, an interval


def possible_sums(base: int, deltas: list[int]) -> tuple[set[int] | None, int, int]:
    """(every sum base + a subset of `deltas`, or None if the span is too wide to list; lowest;
    highest). The sums are bits of one integer over [lowest, highest]: each delta shifts a copy."""
    low = base + sum(d for d in deltas if d < 0)
    high = base + sum(d for d in deltas if d > 0)
    if high - low > EXACT_SUMS:
        return None, low, high
    bits = 1 << (base - low)
    for d, count in Tally(deltas).items():
        step = 1  # c copies of d are 0/1 items of d, 2d, 4d, ...: any count from 0 to c
        while count:
            take = min(step, count)
            bits |= bits << (d * take) if d > 0 else bits >> (-d * take)
            count -= take
            step *= 2
    return {low + i for i, bit in enumerate(reversed(bin(bits)[2:])) if bit == "1"}, low, high


class Counter(MaelstromWorkload):
    negative = False

    def next_op(self, rng: Random, client: int) -> tuple[str, Any]:
        if rng.random() < 0.5:
            return "read", None
        return "add", rng.randint(-5 if self.negative else 0, 5)

    def request(self, f: str, value: Any) -> dict[str, Any]:
        return {"type": "add", "delta": value} if f == "add" else {"type": "read"}

    def parse(self, f: str, body: dict[str, Any]) -> Any:
        return require(body, "value", (int,)) if f == "read" else None

    def finals(self) -> list[tuple[str, str, Any]]:
        return [(node, "read", None) for node in self.nodes]

    def show(self, op: MaelstromOperation) -> str:
        return f"add {op.value} -> {outcome(op)}" if op.f == "add" else f"read -> {outcome(op)}"

    def check(self, history: MaelstromHistory) -> Verdict:
        adds = [op for op in history.ops if op.f == "add"]
        base = sum(op.value for op in adds if op.ok)
        unsure = [op.value for op in adds if op.type == "info" and op.value]
        sums, low, high = possible_sums(base, unsure)
        finals = [op for op in history.ops if op.f == "read" and op.final]
        answered = [op for op in finals if op.ok]
        problems = []
        for read in answered:
            value = read.result
            if (value in sums) if sums is not None else low <= value <= high:
                continue
            acked = sum(1 for op in adds if op.ok)
            if not unsure:
                allowed = ", and no add is in doubt"
            elif sums is not None and len(sums) <= 6:
                allowed = (
                    f"; the {len(unsure)} add(s) in doubt allow only {', '.join(map(str, sorted(sums)))}"
                )
            else:
                allowed = f"; the {len(unsure)} add(s) in doubt allow {low}..{high}"
            hint = f" ({value - base:+d} from the acknowledged sum: an add counted twice, or lost?)"
            problems.append(
                Problem(
                    "wrong-sum",
                    f"{read.node}'s {named(read, f'read -> {value}')} after the heal is not a possible sum: "
                    f"the {acked} acknowledged adds sum to {base}{allowed}{hint}.",
                    (read.index,),
                )
            )
        stats = {
            "acknowledged_sum": base,
            "acknowledged_adds": sum(1 for op in adds if op.ok),
            "indefinite_adds": len(unsure),
            "final_reads": f"{len(answered)}/{len(finals)}",
        }
        silent = sorted({op.node for op in finals} - {op.node for op in answered})
        if not problems and (silent or not finals):
            why = (
                f"{', '.join(silent)} answered none of its final reads"
                if silent
                else "no final read was made"
            )
            return Verdict(UNKNOWN, f"Cannot tell whether every node counts every add: {why}.", (), stats)
        span = f"{base}" if not unsure else f"{low}..{high}"
        checked = f"All {len(answered)} final reads were possible sums of the adds ({span})."
        return judged(problems, checked, stats)


class GCounter(Counter):
    name = "g-counter"
    doc = WORKLOADS[name]


class PnCounter(Counter):
    name = "pn-counter"
    doc = WORKLOADS[name]
    negative = True
