"""What the clients of a check did and saw, and what a checker concluded from it.

A `MaelstromOperation` is one client request from invocation to outcome, Jepsen's way: `ok` (answered with
the workload's `*_ok`), `fail` (a definite error: it did not happen), or `info` (an indefinite
error or no answer in time: it may have happened, now or later). Times are seconds since the run
began. Final reads, made after the faults are healed, are marked `final`.

`with_recovery_hint` says, when what the final reads missed may only be late (lost elements, a
counter off), how long the nodes had after the heal and which option gives them more.
`with_availability` is Maelstrom's availability check (`--availability`): at least a given share
of all operations (final reads too, every try) answered `*_ok`, or every one (`total`).

A `Verdict` is valid, invalid (with the problems found, each naming its operations) or unknown
(the checker could not decide, and says why). Its `summary` is the one paragraph a person reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from bhandar_cli.check.protocol import definite, error_name

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"


@dataclass(slots=True)
class MaelstromOperation:
    """One client operation; mutable because its outcome arrives after it is invoked."""

    index: int
    client: str
    node: str
    f: str
    value: Any
    invoked: float
    completed: float = math.inf
    type: str = "invoke"  # ok | fail | info
    result: Any = None
    code: int | None = None  # the error code, when the node answered with an error
    error: str = ""
    final: bool = False
    msg_id: int = 0  # the request's msg_id (the last attempt's): the journal's messages of this op

    @property
    def ok(self) -> bool:
        return self.type == "ok"

    def answer(self, now: float, result: Any) -> None:
        if self.type == "invoke":
            self.completed, self.type, self.result = now, "ok", result

    def failed(self, now: float, code: int, text: str) -> None:
        if self.type == "invoke":
            self.completed, self.code = now, code
            self.type = "fail" if definite(code) else "info"
            self.error = f"error {code} ({error_name(code)})" + (f": {text}" if text else "")

    def gave_up(self, now: float, why: str) -> None:
        if self.type == "invoke":
            self.completed, self.type, self.error = now, "info", why

    def when(self) -> str:
        end = f"{self.completed:.3f}" if math.isfinite(self.completed) else "never"
        return f"{self.invoked:.3f}-{end} s"


class MaelstromHistory:
    """Every client operation of a run, in invocation order."""

    def __init__(self) -> None:
        self.ops: list[MaelstromOperation] = []

    def invoke(
        self, now: float, client: str, node: str, f: str, value: Any, final: bool = False
    ) -> MaelstromOperation:
        op = MaelstromOperation(len(self.ops), client, node, f, value, now, final=final)
        self.ops.append(op)
        return op

    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "fail": 0, "info": 0}
        for op in self.ops:
            if op.type in out:
                out[op.type] += 1
        return out


@dataclass(frozen=True, slots=True)
class Problem:
    kind: str  # lost, duplicate, not-linearizable, wrong-echo, ...
    text: str  # one or two sentences naming the operations
    ops: tuple[int, ...] = ()


@dataclass(frozen=True)
class Verdict:
    status: str  # valid | invalid | unknown
    summary: str  # one paragraph: what went wrong (or what was checked)
    problems: tuple[Problem, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)
    staleness: tuple[tuple[float, float, int], ...] = ()  # (ms after the ack, fraction fresh, reads)
    hints: tuple[str, ...] = ()  # what to change when the verdict may be the options' doing

    @property
    def valid(self) -> bool:
        return self.status == VALID


def judged(problems: list[Problem], checked: str, stats: dict[str, Any], **extra: Any) -> Verdict:
    """Valid when there are no problems (`checked` says what was checked), else invalid with the
    first problems in the summary."""
    if not problems:
        return Verdict(VALID, checked, (), stats, **extra)
    more = f" ({len(problems) - 3} more problems in the report)" if len(problems) > 3 else ""
    summary = " ".join(p.text for p in problems[:3]) + more
    return Verdict(INVALID, summary, tuple(problems), stats, **extra)


def availability_text(required: float) -> str:
    return "total" if required >= 1.0 else f"{required:g}"


def with_availability(verdict: Verdict, history: MaelstromHistory, required: float | None) -> Verdict:
    """The verdict, made invalid when fewer than `required` of the operations succeeded (None: no
    requirement; 1.0: `total`, every one). The share is in the stats either way."""
    ops = len(history.ops)
    ok = sum(op.ok for op in history.ops)
    share = ok / ops if ops else 1.0
    stats = {**verdict.stats, "ok_fraction": round(share, 4)}
    if required is None or share >= required:
        return replace(verdict, stats=stats)
    asked = "every one" if required >= 1.0 else f"at least {required:.1%}"
    found = Problem(
        "availability",
        f"Only {ok:,} of {ops:,} operations ({share:.1%}) succeeded; "
        f"--availability {availability_text(required)} asks for {asked}.",
    )
    summary = found.text if verdict.status != INVALID else f"{found.text} {verdict.summary}"
    return Verdict(INVALID, summary, (found, *verdict.problems), stats, verdict.staleness)


RECOVERY_KINDS = ("lost", "wrong-sum")  # problems a node that converges slowly also shows


def with_recovery_hint(verdict: Verdict, recovery: float) -> Verdict:
    """An invalid verdict whose final reads missed something gets the hint that the nodes may
    only have been slow: they had `recovery` seconds after the heal, and --recovery gives more."""
    if not any(p.kind in RECOVERY_KINDS for p in verdict.problems):
        return verdict
    hint = (
        f"The final reads came {recovery:g} s after the heal (--recovery {recovery:g}s); a node that "
        "replicates more slowly needs more: if a longer --recovery makes this pass, the node converges "
        "late rather than never."
    )
    return replace(verdict, summary=f"{verdict.summary} Hint: {hint}", hints=(*verdict.hints, hint))
