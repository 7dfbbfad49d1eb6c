"""lin-kv: a linearizable key-value store. `read` {key} -> `read_ok` {value}, `write` {key,
value} -> `write_ok`, `cas` {key, from, to} -> `cas_ok`; error 20 when the key does not exist,
22 when a cas finds another value.

Clients work on a few keys at a time, as Jepsen's register test does, and move to fresh keys
every `KEY_OPS` operations so that each key's history stays small enough to search. Every write
(and cas) writes a value never written before, and a cas expects the value its client last read
of that key: so a read names the one write it saw, and a counterexample is unambiguous.

Checker: each key's history is linearizable (check/linearizable.py); a key that is not is shown
by a small set of its operations that no real-time order explains, and when they include a read
that missed a completed write, by that pair; a search cut off by its budget makes the verdict
unknown, never a guess.
"""

from __future__ import annotations

from random import Random
from typing import Any

from bhandar_cli.check.catalog import WORKLOADS
from bhandar_cli.check.linearizable import KeyResult, check_registers
from bhandar_cli.check.maelstrom_history import (
    INVALID,
    UNKNOWN,
    MaelstromHistory,
    MaelstromOperation,
    Problem,
    Verdict,
    judged,
)
from bhandar_cli.check.maelstrom_workload import MaelstromWorkload, named, outcome, require

KEY_OPS = 60  # operations on the keys in use before moving to new ones
KEYS_AT_ONCE = 2


class LinKv(MaelstromWorkload):
    name = "lin-kv"
    doc = WORKLOADS[name]

    def __init__(self, rng: Random, nodes: list[str]) -> None:
        super().__init__(rng, nodes)
        self.issued = 0
        self.last: dict[tuple[str, int], Any] = {}  # (client, key) -> the value it last read

    def next_op(self, rng: Random, client: int) -> tuple[str, Any]:
        base = (self.issued // KEY_OPS) * KEYS_AT_ONCE
        self.issued += 1
        key = base + rng.randrange(KEYS_AT_ONCE)
        roll = rng.random()
        if roll < 1 / 3:
            return "read", {"key": key}
        if roll < 2 / 3:
            return "write", {"key": key, "value": self.unique()}
        expected = self.last.get((f"c{client}", key), max(1, self.serial - rng.randrange(3)))
        return "cas", {"key": key, "from": expected, "to": self.unique()}

    def completed(self, op: MaelstromOperation) -> None:
        if op.f == "read" and op.ok:
            self.last[(op.client, op.value["key"])] = op.result

    def request(self, f: str, value: Any) -> dict[str, Any]:
        return {"type": f, **value}

    def parse(self, f: str, body: dict[str, Any]) -> Any:
        return require(body, "value") if f == "read" else None

    def show(self, op: MaelstromOperation) -> str:
        v = op.value
        if op.f == "read":
            return f"read key {v['key']} -> {outcome(op)}"
        if op.f == "write":
            return f"write key {v['key']} = {v['value']} -> {outcome(op)}"
        return f"cas key {v['key']} {v['from']}->{v['to']} -> {outcome(op)}"

    def check(self, history: MaelstromHistory) -> Verdict:
        results = check_registers(history.ops)
        bad = [r for r in results if r.status == INVALID]
        cut = [r for r in results if r.status == UNKNOWN]
        stats = {
            "keys": len(results),
            "ops_checked": sum(r.ops for r in results),
            "search_seconds": round(sum(r.seconds for r in results), 3),
            "keys_not_linearizable": len(bad),
            "keys_unknown": len(cut),
        }
        problems = [self._problem(history, r) for r in bad]
        if not problems and cut:
            keys = ", ".join(r.key for r in cut[:5])
            summary = f"Linearizability unknown for {len(cut)} key(s) ({keys}): {cut[0].why}."
            return Verdict(UNKNOWN, summary, (), stats)
        done = stats["ops_checked"]
        checked = f"Every one of the {len(results)} keys' histories ({done} operations) is linearizable."
        return judged(problems, checked, stats)

    def _problem(self, history: MaelstromHistory, result: KeyResult) -> Problem:
        ops = [history.ops[w.id] for w in result.witness]
        listed = "; ".join(named(op, self.show(op)) for op in ops)
        before = [
            f"#{a.index} before #{b.index}"
            for a in ops
            for b in ops
            if a is not b and a.type != "info" and a.completed < b.invoked
        ]
        order = f" (real time puts {', '.join(before)})" if before else ""
        pair = stale_pair(ops)
        story = ""
        if pair is not None:
            write, read = pair
            story = (
                f" The pair: #{read.index} read {read.result} although #{write.index} had written "
                f"{write.value.get('value', write.value.get('to'))} over it "
                f"and completed before #{read.index} began."
            )
        return Problem(
            "not-linearizable",
            f"Key {result.key} is not linearizable: no order of these {len(ops)} operations that respects "
            f"real time{order} explains what they returned: {listed}.{story}",
            tuple(op.index for op in ops),
        )


def stale_pair(ops: list[MaelstromOperation]) -> tuple[MaelstromOperation, MaelstromOperation] | None:
    """(write, read): a read that returned a value although the write, which completed before the
    read began, had replaced it (every write of that value completed before the write began)."""
    writes = [op for op in ops if op.ok and op.f in ("write", "cas")]

    def made(op: MaelstromOperation) -> Any:
        return op.value["value"] if op.f == "write" else op.value["to"]

    for read in (op for op in ops if op.ok and op.f == "read"):
        sources = [w for w in writes if made(w) == read.result]
        for write in writes:
            replaced = sources and all(s.completed < write.invoked for s in sources)
            if write.completed < read.invoked and made(write) != read.result and replaced:
                return write, read
    return None
