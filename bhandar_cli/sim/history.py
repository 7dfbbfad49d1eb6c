"""The history of a chaos run: every client operation as invoked and completed, and what the
checker concluded about it (violations, counts). `sim/checker/check.py` judges it."""

import math
from dataclasses import dataclass

from bhandar_cli.core.model.records import Record
from bhandar_cli.core.protocol.messages import Failure, GetResult, Result

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
