"""The history of a chaos run: every client operation as invoked and completed, and what the
checker concluded about it (violations, counts). `sim/checker/check.py` judges it. And how every
HTML page of a run draws it (`bhandar chaos --report`, `bhandar check --report`): the style sheet
and each kind of fault's colour, so a fault reads the same on both."""

import math
from dataclasses import dataclass

from bhandar_cli.core.model import Record
from bhandar_cli.core.protocol import Failure, GetResult, Result

WRITES = ("put", "delete")


@dataclass(slots=True)
class Operation:
    """One client operation. Mutable because its outcome arrives after it is invoked."""

    index: int
    client: int
    kind: str  # get | put | delete | incr
    keyspace: str
    key: str
    level: str
    invoked: float
    value: bytes | None = None
    context: dict[str, int] | None = None
    request_id: str = ""
    delta: int = 0
    attempt: int = 1
    completed: float = math.inf
    outcome: str = "pending"  # ok | fail | timeout (the client gave up waiting)
    code: str = ""
    record: Record | None = None  # what a successful get returned

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


class History:
    """Every client operation of a run, in invocation order."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def invoke(
        self,
        now: float,
        client: int,
        kind: str,
        keyspace: str,
        key: str,
        level: str,
        value: bytes | None = None,
        context: dict[str, int] | None = None,
        request_id: str = "",
        delta: int = 0,
        attempt: int = 1,
    ) -> Operation:
        op = Operation(
            len(self.ops), client, kind, keyspace, key, level, now, value, context, request_id, delta, attempt
        )
        self.ops.append(op)
        return op

    @staticmethod
    def complete(op: Operation, now: float, result: Result) -> None:
        if op.outcome != "pending":
            return  # the client already gave up; a late answer changes nothing it knows
        op.completed = now
        if isinstance(result, Failure):
            op.outcome, op.code = "fail", result.code
            return
        op.outcome = "ok"
        if isinstance(result, GetResult):
            op.record = result.record

    @staticmethod
    def fail(op: Operation, now: float, outcome: str, code: str) -> None:
        if op.outcome == "pending":
            op.completed, op.outcome, op.code = now, outcome, code


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str  # lost_write | resurrected | stale_read_strict | counter | not_converged | dot_reused | ...
    keyspace: str
    key: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.keyspace}/{self.key}: {self.detail}"


@dataclass(frozen=True, slots=True)
class CheckResult:
    violations: tuple[Violation, ...]
    ops: int
    ok_ops: int
    by_kind: dict[str, int]
    acked_writes: int  # puts, deletes and increments the client saw acknowledged
    lost_writes: int
    stale_reads: int
    strict_stale_reads: int
    reads: int
    reads_with_siblings: int
    max_siblings: int
    counter_keys: int
    increments: int  # distinct request ids
    retries: int  # attempts beyond the first of a request id
    keys_checked: int
    stored_twice: int  # puts stored as two identical siblings (a duplicated request, see learn_dots)
    moving_stale_reads: int = 0  # strict-quorum stale reads of writes made during a range movement

    @property
    def availability(self) -> float:
        return self.ok_ops / self.ops if self.ops else 1.0

    @property
    def passed(self) -> bool:
        return not self.violations


# How a run's HTML page looks, for both pages.
FAULT_COLOURS = {
    "kill": "#e15759", "restart": "#ff9da7", "partition": "#f28e2b", "clog": "#edc948",
    "delay": "#76b7b2", "loss": "#b07aa1", "duplicate": "#9c755f", "join": "#59a14f",
    "decommission": "#4e79a7",
}  # fmt: skip
STYLE = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 1rem; color: #111; background: #fff; }
.verdict { font-size: 1.3rem; font-weight: bold; }
.failed { color: #b00020; } .passed { color: #1b7f3b; }
.replay { background: #fff3cd; border: 2px solid #b00020; padding: 0.5rem; margin: 0.5rem 0; }
.replay code { font-size: 1.05rem; user-select: all; }
ol.violations { font-family: monospace; font-size: 0.9rem; }
pre { background: #f6f8fa; padding: 0.5rem; overflow: auto; }
svg text { font-size: 11px; }
.legend span { margin-right: 1rem; }
.box { display: inline-block; width: 0.8rem; height: 0.8rem; vertical-align: middle; margin-right: 0.2rem; }
"""
