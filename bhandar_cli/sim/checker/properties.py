"""The properties the checker judges: stale reads, lost writes, resurrections, false siblings and
counter bounds (the module docstring of `checker` states each one and why).

Each function looks at one key's operations and its final record, given what `checker_dots`
learned about dots, and returns the violations it finds (and the figures the report counts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from bhandar_cli.core.model import Dot, KeyspaceDef, PNCounter, Record, Versioned, covers, required
from bhandar_cli.sim import History, Operation, Violation
from bhandar_cli.sim.checker.dots import dot_text, show_value


def stale_reads(
    ks: KeyspaceDef,
    key: str,
    writes: list[Operation],
    reads: list[Operation],
    superseded_at: Mapping[int, float],
    movements: Sequence[tuple[float, float]],
) -> tuple[int, int, int, list[Violation]]:
    """Reads lacking an acknowledged, not yet superseded put: (stale, strict violations, strict
    ones excused by a range movement, violations)."""
    acked = sorted((op for op in writes if op.kind == "put" and op.ok), key=lambda op: op.completed)
    answered = sorted((op for op in reads if op.ok), key=lambda op: op.invoked)
    stale = strict_stale = moving = 0
    violations: list[Violation] = []
    active: list[Operation] = []
    i = 0
    for read in answered:
        while i < len(acked) and acked[i].completed < read.invoked:
            active.append(acked[i])
            i += 1
        # Writes superseded before this read was invoked can never matter again (invocations only
        # grow along this loop), so the active set stays small.
        active = [w for w in active if superseded_at.get(w.index, math.inf) > read.invoked]
        values = {s.value for s in read.record.siblings} if isinstance(read.record, Versioned) else set()
        missed = [
            w
            for w in active
            if w.value not in values and superseded_at.get(w.index, math.inf) > read.completed
        ]
        if not missed:
            continue
        stale += 1
        r = required(read.level, ks.n)
        overlap = [w for w in missed if r + required(w.level, ks.n) > ks.n]
        if ks.quorum == "strict" and overlap and all(_during(w, movements) for w in overlap):
            moving += 1
        elif ks.quorum == "strict" and overlap:
            overlap = [w for w in overlap if not _during(w, movements)]
            strict_stale += 1
            w = overlap[0]
            violations.append(
                Violation(
                    "stale_read_strict",
                    ks.name,
                    key,
                    f"read #{read.index} at {read.level} (t={read.invoked:.4f}s) missed "
                    f"{show_value(w.value)}, acknowledged at {w.level} at t={w.completed:.4f}s: "
                    "R+W > N must intersect",
                )
            )
    return stale, strict_stale, moving, violations


def _during(op: Operation, windows: Sequence[tuple[float, float]]) -> bool:
    """Did the operation run (from invocation to answer) while the ring was changing?"""
    return any(op.invoked <= end and op.completed >= start for start, end in windows)


def lost_writes(
    ks: str,
    key: str,
    writes: list[Operation],
    record: Record | None,
    dot_of: Mapping[bytes, Dot],
    superseded_at: Mapping[int, float],
) -> list[Violation]:
    present = {s.value for s in record.siblings} if isinstance(record, Versioned) else set()
    out: list[Violation] = []
    for op in writes:
        if op.kind != "put" or not op.ok or op.value in present or op.index in superseded_at:
            continue
        dot = dot_of.get(op.value)  # type: ignore[arg-type]
        why = "never read back" if dot is None else f"dot {dot_text(dot)}, no write's context covers it"
        out.append(
            Violation(
                "lost_write",
                ks,
                key,
                f"acknowledged put #{op.index} of {show_value(op.value)} at {op.level} "
                f"(t={op.completed:.4f}s) is gone ({why})",
            )
        )
    return out


def resurrections(ks: str, key: str, writes: list[Operation], record: Record | None) -> list[Violation]:
    if not isinstance(record, Versioned):
        return []
    own_value = {op.value: op for op in writes if op.kind == "put"}
    out: list[Violation] = []
    for s in record.siblings:
        if s.void:
            continue  # nobody's write: a read shows nothing of it
        for op in writes:
            if not op.ok or not op.context or not covers(op.context, s.dot):
                continue
            if s.value is not None and own_value.get(s.value) is op:
                continue  # a write's context never covers its own dot; be safe all the same
            what = "deleted" if op.kind == "delete" else "overwritten"
            out.append(
                Violation(
                    "resurrected",
                    ks,
                    key,
                    f"{show_value(s.value)} ({dot_text(s.dot)}) was {what} by acknowledged {op.kind} "
                    f"#{op.index} (t={op.completed:.4f}s) and came back",
                )
            )
            break
    return out


def false_siblings(history: History, dots_of_value: Mapping[bytes, set[Dot]]) -> list[Violation]:
    """Reads that returned a value beside a put whose context had seen that value (covered a dot it
    was seen under). Reported once per (put, value)."""
    puts = {op.value: op for op in history.ops if op.kind == "put" and op.value is not None}
    out: list[Violation] = []
    reported: set[tuple[int, bytes]] = set()
    for read in history.ops:
        if read.kind != "get" or not read.ok or not isinstance(read.record, Versioned):
            continue
        values = [s.value for s in read.record.siblings if s.value is not None]
        if len(values) < 2:
            continue
        for later in values:
            put = puts.get(later)
            if put is None or not put.context:
                continue
            for earlier in values:
                if earlier == later or (put.index, earlier) in reported:
                    continue
                seen = [d for d in dots_of_value.get(earlier, ()) if covers(put.context, d)]
                if not seen:
                    continue
                reported.add((put.index, earlier))
                out.append(
                    Violation(
                        "false_sibling",
                        read.keyspace,
                        read.key,
                        f"read #{read.index} (t={read.invoked:.4f}s) returned {show_value(earlier)} beside "
                        f"{show_value(later)}, but put #{put.index} of {show_value(later)} had the "
                        f"context of a read that saw {show_value(earlier)} ({dot_text(seen[0])}): it "
                        "should have replaced it",
                    )
                )
    return out


def check_counter(
    ks: str, key: str, incrs: list[Operation], record: Record | None
) -> tuple[int, int, list[Violation]]:
    by_id: dict[str, list[Operation]] = {}
    for op in incrs:
        by_id.setdefault(op.request_id, []).append(op)
    acked_sum = lo_extra = hi_extra = 0
    for attempts in by_id.values():
        delta = attempts[0].delta
        if any(a.ok for a in attempts):
            acked_sum += delta
        elif delta >= 0:
            hi_extra += delta
        else:
            lo_extra += delta
    value = record.value if isinstance(record, PNCounter) else 0
    lo, hi = acked_sum + lo_extra, acked_sum + hi_extra
    retries = len(incrs) - len(by_id)
    if lo <= value <= hi:
        return len(by_id), retries, []
    detail = (
        f"value {value} outside [{lo}, {hi}]: acknowledged sum {acked_sum} over {len(by_id)} request ids, "
        f"unacknowledged attempts could add {lo_extra}..+{hi_extra}"
    )
    return len(by_id), retries, [Violation("counter", ks, key, detail)]
