"""dynamo-kv: Bhandar's own workload, a Dynamo-style store with causal contexts and siblings.

`get` {key} -> `get_ok` {values, context}: every concurrent version (sibling) of the key and one
opaque context string (null or absent: none). `put` {key, value, context} -> `put_ok`: a write
that replaces exactly the versions the context came from (a get's), and sits beside any other
version as a sibling; without a context it replaces nothing. Values are distinct integers.

Clients read a key, then usually write it with the context that read returned (sometimes
blind), so the checker knows from the clients alone what each write had seen: a put written
with the context of a get that returned values V *covers* V and everything V covered.

Checker (the chaos checker's rules, judged from what clients saw):
- no acknowledged write lost: after the heal, each node's final read of each key holds every
  acknowledged put of that key or a value that covers it;
- siblings only where writes were concurrent: no read holds a value together with a value that
  covers it (the newer write should have replaced the older);
- nothing invented: every value read was written to that key by a put that did not fail
  definitely, and was invoked before the read answered.
Reads during the run may be stale: counted, and drawn as the staleness curve.
"""

from __future__ import annotations

import json
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
from bhandar_cli.check.staleness import curve

KEYS = 4
SHOWN = 5


class DynamoKv(MaelstromWorkload):
    name = "dynamo-kv"
    doc = WORKLOADS[name]

    def __init__(self, rng: Random, nodes: list[str]) -> None:
        super().__init__(rng, nodes)
        # (client, key) -> (values, context)
        self.seen: dict[tuple[str, int], tuple[tuple[int, ...], Any]] = {}

    def next_op(self, rng: Random, client: int) -> tuple[str, Any]:
        key = rng.randrange(KEYS)
        roll = rng.random()
        if roll < 0.4:
            return "get", {"key": key}
        saw, context = self.seen.get((f"c{client}", key), ((), None))
        if roll > 0.85:
            saw, context = (), None  # a blind write
        return "put", {"key": key, "value": self.unique(), "context": context, "saw": saw}

    def request(self, f: str, value: Any) -> dict[str, Any]:
        if f == "get":
            return {"type": "get", "key": value["key"]}
        return {"type": "put", "key": value["key"], "value": value["value"], "context": value["context"]}

    def parse(self, f: str, body: dict[str, Any]) -> Any:
        if f != "get":
            return None
        values = require(body, "values", (list,))
        context = body.get("context")
        if context is not None and type(context) is not str:
            raise BadAnswer('get_ok whose "context" is not a string or null')
        return tuple(values), context

    def completed(self, op: MaelstromOperation) -> None:
        if op.f == "get" and op.ok:
            values, context = op.result
            self.seen[(op.client, op.value["key"])] = (values, context)

    def finals(self) -> list[tuple[str, str, Any]]:
        return [(node, "get", {"key": key}) for key in range(KEYS) for node in self.nodes]

    def show(self, op: MaelstromOperation) -> str:
        key = op.value["key"]
        if op.f == "get":
            got = outcome(op, list(op.result[0]) if op.ok else None)
            return f"get key {key} -> {got}"
        ctx = f" with the context of a read of {list(op.value['saw'])}" if op.value["context"] else " blind"
        return f"put key {key} = {op.value['value']}{ctx} -> {outcome(op)}"

    def check(self, history: MaelstromHistory) -> Verdict:
        puts: dict[int, MaelstromOperation] = {}  # value -> its put (values are unique across keys)
        for op in history.ops:
            if op.f == "put":
                puts[op.value["value"]] = op
        saw = {v: {s for s in op.value["saw"] if isinstance(s, int)} for v, op in puts.items()}
        memo: dict[int, frozenset[int]] = {}

        def closure(v: int) -> frozenset[int]:
            """Every value the put of `v` covered, directly or through what it covered."""
            found = memo.get(v)
            if found is None:
                memo[v] = frozenset()  # a cycle (only invented values can make one) stops here
                out: set[int] = set()
                for u in saw.get(v, ()):
                    out.add(u)
                    out |= closure(u)
                found = memo[v] = frozenset(out)
            return found

        problems: list[Problem] = []
        gets = [op for op in history.ops if op.f == "get" and op.ok]
        for read in gets:
            problems.extend(self._read_problems(read, puts, closure))
        acked_by_key: dict[int, list[MaelstromOperation]] = {}
        for op in puts.values():
            if op.ok:
                acked_by_key.setdefault(op.value["key"], []).append(op)
        samples: list[tuple[float, bool]] = []
        stale = 0
        lost: set[int] = set()
        for read in gets:
            values = [v for v in read.result[0] if isinstance(v, int)]
            covered = set(values).union(*(closure(v) for v in values))
            before = [w for w in acked_by_key.get(read.value["key"], []) if w.completed < read.invoked]
            missing = [w for w in before if w.value["value"] not in covered]
            if read.final and missing:
                lost.update(w.value["value"] for w in missing)
                shown = "; ".join(named(w, self.show(w)) for w in missing[:SHOWN])
                more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
                problems.append(
                    Problem(
                        "lost",
                        f"{len(missing)} acknowledged put(s) lost: "
                        f"{read.node}'s {named(read, self.show(read))} "
                        f"after the heal holds neither them nor a value written over them: {shown}{more}.",
                        (read.index, *(w.index for w in missing[:SHOWN])),
                    )
                )
            if not read.final:
                stale += bool(missing)
                samples.extend((read.invoked - w.completed, w.value["value"] in covered) for w in before)
        points, worst = curve(samples)
        finals = [op for op in history.ops if op.final]
        answered = [op for op in finals if op.ok]
        stats = {
            "acknowledged_puts": sum(len(v) for v in acked_by_key.values()),
            "reads": sum(1 for r in gets if not r.final),
            "lost": len(lost),
            "stale_reads": stale,
            "max_siblings": max((len(r.result[0]) for r in gets), default=0),
            "final_reads": f"{len(answered)}/{len(finals)}",
            "latest_miss_ms": round(worst, 1),
        }
        silent = sorted({op.node for op in finals} - {op.node for op in answered})
        if not problems and (silent or not finals):
            why = (
                f"{', '.join(silent)} answered none of its final reads"
                if silent
                else "no final read was made"
            )
            summary = f"Cannot tell whether any acknowledged put was lost: {why}."
            return Verdict(UNKNOWN, summary, (), stats, points)
        checked = (
            f"No acknowledged put was lost ({stats['acknowledged_puts']} acknowledged, "
            f"{len(answered)} final reads), no read held a value beside one written over it, and no "
            "read returned an unwritten value."
        )
        return judged(problems, checked, stats, staleness=points)

    def _read_problems(
        self, read: MaelstromOperation, puts: dict[int, MaelstromOperation], closure: Any
    ) -> list[Problem]:
        out: list[Problem] = []
        key = read.value["key"]
        values = list(read.result[0])
        for v in values:
            put = puts.get(v) if isinstance(v, int) else None
            if put is None or put.value["key"] != key or put.invoked > read.completed:
                said = named(read, self.show(read))
                text = f"{said} returned {json.dumps(v)}, which no put wrote to key {key}."
                out.append(Problem("invented", text, (read.index,)))
            elif put.type == "fail":
                said = named(read, self.show(read))
                text = f"{said} returned {v}, but {named(put, self.show(put))} failed definitely."
                out.append(Problem("invented", text, (read.index, put.index)))
        ints = [v for v in values if isinstance(v, int)]
        for newer in ints:
            older = [v for v in ints if v in closure(newer)]
            if older:
                put = puts[newer]
                out.append(
                    Problem(
                        "false-sibling",
                        f"{named(read, self.show(read))} holds {older[0]} beside {newer}, but "
                        f"{named(put, self.show(put))} had seen {older[0]}: it should have replaced it, "
                        "not become its sibling.",
                        (read.index, put.index, puts[older[0]].index),
                    )
                )
                break
        return out
