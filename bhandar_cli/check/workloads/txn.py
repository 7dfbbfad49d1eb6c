"""txn-rw-register and txn-list-append: transactions over a map of keys, as Maelstrom's.

`txn` {txn: [[f, k, v], ...]} -> `txn_ok` {txn: [...]}, the micro-operations done in order: "r"
(v null in the request; the value read in the answer, null for a key never written), "w"
(rw-register: set the key) or "append" (list-append: add to the key's list; reads return
lists). Writes come back unchanged. A transaction that did not happen answers error 30
(txn-conflict), or any definite error.

Clients work as Maelstrom's do (Elle's generator with Maelstrom's settings): `KEY_COUNT` keys at
once, drawn exponentially (each half as likely as the one before: a few hot keys, as contention
shows anomalies), 1 to 4 micro-operations per transaction, each key written at most
`WRITES_PER_KEY` times before a fresh key takes its place, and every value written to a key
unique, so a read names the transaction it saw.

Checker: check/elle.py infers the dependencies between transactions and searches their cycles;
the verdict is invalid only for anomalies one of the consistency models prohibits
(`--consistency-models`, by default strict-serializable as Maelstrom's), and names each with
its transactions and the cycle that shows it. Anomalies the models allow are counted and named,
not judged. No final reads: a transactional history is judged as it stands.
"""

from __future__ import annotations

import json
import math
from random import Random
from typing import Any

from bhandar_cli.check import dependencies, elle
from bhandar_cli.check.catalog import DEFAULT_CONSISTENCY_MODELS, WORKLOADS
from bhandar_cli.check.maelstrom_history import (
    UNKNOWN,
    MaelstromHistory,
    MaelstromOperation,
    Problem,
    Verdict,
    judged,
)
from bhandar_cli.check.maelstrom_workload import BadAnswer, MaelstromWorkload, named, require

KEY_COUNT = 10  # keys in use at once
MAX_TXN_LENGTH = 4
WRITES_PER_KEY = 16  # Maelstrom's --max-writes-per-key


class TxnWorkload(MaelstromWorkload):
    write = "w"  # the name of the write micro-operation
    analyse = staticmethod(dependencies.rw_register)

    def __init__(self, rng: Random, nodes: list[str]) -> None:
        super().__init__(rng, nodes)
        self.keys = list(range(KEY_COUNT))
        self.next_key = KEY_COUNT
        self.written: dict[int, int] = {}  # key -> values written to it so far

    def next_op(self, rng: Random, client: int) -> tuple[str, Any]:
        mops: list[list[Any]] = []
        for _ in range(rng.randint(1, MAX_TXN_LENGTH)):
            slot = min(int(rng.expovariate(math.log(2))), KEY_COUNT - 1)
            key = self.keys[slot]
            if rng.random() < 0.5:
                mops.append(["r", key, None])
                continue
            self.written[key] = self.written.get(key, 0) + 1
            mops.append([self.write, key, self.written[key]])
            if self.written[key] >= WRITES_PER_KEY:
                self.keys[slot] = self.next_key
                self.next_key += 1
        return "txn", mops

    def request(self, f: str, value: Any) -> dict[str, Any]:
        return {"type": "txn", "txn": value}

    def parse(self, f: str, body: dict[str, Any]) -> Any:
        mops = require(body, "txn", (list,))
        out = []
        for mop in mops:
            if type(mop) is not list or len(mop) != 3 or mop[0] not in ("r", self.write):
                raise BadAnswer(
                    f'txn_ok whose "txn" holds {json.dumps(mop)[:80]}, not [f, k, v] ("r" or "{self.write}")'
                )
            if mop[0] == "r" and self.write == "append" and mop[2] is not None and type(mop[2]) is not list:
                raise BadAnswer(f"txn_ok whose read {json.dumps(mop)[:80]} is neither a list nor null")
            out.append(tuple(mop))
        return tuple(out)

    def show(self, op: MaelstromOperation) -> str:
        if op.ok:
            return f"txn {_mops(op.result)} -> ok"
        asked = _mops([(f, k, "?" if f == "r" else v) for f, k, v in op.value])
        return f"txn {asked} -> {op.error or ('no answer yet' if op.type == 'invoke' else op.type)}"

    def check(self, history: MaelstromHistory) -> Verdict:
        models = self.consistency_models or DEFAULT_CONSISTENCY_MODELS
        prohibited = elle.prohibited(models)
        txns, problems = self._txns(history)
        realtime = any(k.endswith("-realtime") for k in prohibited)
        found = self.analyse(txns, realtime)
        by_index = {op.index: op for op in history.ops}
        allowed: dict[str, int] = {}
        for kind, n in found.counts.items():
            if kind not in prohibited:
                allowed[kind] = n
        for anomaly in found.anomalies:
            if anomaly.kind in prohibited:
                problems.append(self._problem(anomaly, by_index))
        against = ", ".join(models)
        stats: dict[str, Any] = {
            "consistency_models": list(models),
            "transactions": sum(1 for t in txns if t.status == "ok"),
            "failed": sum(1 for t in txns if t.status == "fail"),
            "indefinite": sum(1 for t in txns if t.status == "info"),
            "edges": found.edges,
            "anomalies": found.counts,
        }
        also = ""
        if allowed:
            listed = ", ".join(f"{k} x{n}" for k, n in sorted(allowed.items()))
            also = f" Found, and allowed by {against}: {listed}."
        if problems:
            quoted = sum(1 for a in found.anomalies if a.kind in prohibited)
            more = sum(n for k, n in found.counts.items() if k in prohibited) - quoted
            verdict = judged(problems, "", stats)
            tail = f" ({more} more of these kinds not quoted.)" if more > 0 else ""
            return Verdict(
                verdict.status,
                f"Not {against}: {verdict.summary}{tail}{also}",
                verdict.problems,
                stats,
            )
        if found.cut_short:
            summary = (
                f"Cannot tell whether the history is {against}: the cycle search gave up after "
                f"{elle.CYCLE_BUDGET} steps.{also}"
            )
            return Verdict(UNKNOWN, summary, (), stats)
        checked = (
            f"No anomaly {against} prohibits in {stats['transactions']} committed transactions "
            f"({sum(found.edges.values())} dependencies inferred).{also}"
        )
        return judged([], checked, stats)

    def _txns(self, history: MaelstromHistory) -> tuple[list[elle.Txn], list[Problem]]:
        """The history's transactions; a txn_ok that does not answer its request is a problem."""
        txns: list[elle.Txn] = []
        problems: list[Problem] = []
        for op in history.ops:
            if op.f != "txn":
                continue
            asked = tuple(tuple(m) for m in op.value)
            mops = asked
            if op.ok:
                got = op.result
                same = len(got) == len(asked) and all(
                    g[0] == a[0] and g[1] == a[1] and (g[0] == "r" or g[2] == a[2])
                    for g, a in zip(got, asked, strict=False)
                )
                if not same:
                    problems.append(
                        Problem(
                            "wrong-txn",
                            f"{named(op, self.show(op))} does not answer the transaction asked, "
                            f"{_mops(asked)}: txn_ok must return its micro-operations in order, "
                            "writes unchanged.",
                            (op.index,),
                        )
                    )
                    continue
                mops = got
            txns.append(elle.Txn(op.index, op.type, mops, op.invoked, op.completed))
        return txns, problems

    def _problem(self, anomaly: elle.Anomaly, by_index: dict[int, MaelstromOperation]) -> Problem:
        ops = [by_index[i] for i in dict.fromkeys(anomaly.txns)]
        listed = "; ".join(named(op, self.show(op)) for op in ops)
        what = f"the cycle {anomaly.text}." if anomaly.cycle else anomaly.text
        return Problem(
            anomaly.kind,
            f"{anomaly.kind} ({elle.meaning(anomaly.kind)}): {what} Where {listed}.",
            tuple(op.index for op in ops),
        )


def _mops(mops: Any) -> str:
    """Micro-operations as a person reads them: `[r 1 [3, 4], append 2 7]`."""

    def value(v: Any) -> str:
        return "nil" if v is None else v if v == "?" else json.dumps(v)

    return "[" + ", ".join(f"{f} {json.dumps(k)} {value(v)}" for f, k, v in mops) + "]"


class TxnRwRegister(TxnWorkload):
    name = "txn-rw-register"
    doc = WORKLOADS[name]


class TxnListAppend(TxnWorkload):
    name = "txn-list-append"
    doc = WORKLOADS[name]
    write = "append"
    analyse = staticmethod(dependencies.list_append)
