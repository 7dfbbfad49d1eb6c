"""The chaos checker: the history of every client operation, and the properties it must satisfy.

This module owns what "the store told the truth" means. The workload records each operation as it
is invoked and completed (`History`); after the run has healed, `check` judges the history against
the final state of every key, seeing only what clients saw plus the replicas' final records:

- lost writes: every acknowledged put is still a sibling of its key, or was superseded by a write
  whose context covered its dot. A client learns a write's dot only by reading it back; a write
  nobody ever read cannot have been superseded (contexts come only from reads), so an acknowledged
  value that is absent and was never read is lost.
- resurrection: no final sibling is covered by the context of an acknowledged put or delete (a
  deleted value stays deleted unless rewritten). The store prunes contexts past `max_vv_entries`,
  and a pruned context may legitimately let an old sibling back (Dynamo's trade-off), so the check
  is skipped for keys where some write carried a context that large, and those keys are counted.
- stale reads: a successful read that lacks an acknowledged put whose acknowledgement the client
  had before it invoked the read (and that nobody had superseded by the time the read answered).
  They are counted; in a strict-quorum keyspace where R + W > N they break quorum intersection and
  are violations, except when the missed write ran during a range movement (a join or
  decommission, until every node saw it finish, plus a settling time): nodes then briefly disagree
  on who the replicas are, and a write to the new replicas can miss a read from the old ones
  (Cassandra has the same window; only consensus on the ring closes it). Those are counted apart.
- counters: acked sum <= value <= acked sum + unacknowledged attempts (each request id counted
  once, however often it was retried), with negative deltas widening the range downwards.
- convergence: after the heal (and the anti-entropy rounds the chaos run makes), every home
  replica of every key holds the same record, and no hint is left anywhere. The caller decides who
  the home replicas are: with joins and decommissions, the final ring as the live nodes see it.
- dots: one dot always names one write (same value and context wherever it is seen), and every
  value a read returns was written to that key by some client. One put seen under two dots with
  the same context is not a violation but is counted ("stored twice"): the network duplicated a
  forwarded request and its coordinator restarted between the copies, forgetting the first; two
  identical siblings result and nothing is lost.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bhandar_cli.core.config import KeyspaceDef, required
from bhandar_cli.core.crdt import PNCounter
from bhandar_cli.core.records import Record, Versioned, same_record
from bhandar_cli.core.versions import Dot
from bhandar_cli.sim.history import NOT_APPLIED, WRITES, CheckResult, History, Operation, Violation


@dataclass
class _KeyFacts:
    """What the checker learned about one key, gathered in one pass over the history."""

    writes: list[Operation] = field(default_factory=list)
    reads: list[Operation] = field(default_factory=list)
    incrs: list[Operation] = field(default_factory=list)


def _dot_text(dot: Dot) -> str:
    return f"{dot[0]}:{dot[1]}"


def _show(value: bytes | None) -> str:
    return "tombstone" if value is None else value.decode("utf-8", "replace")


def check(
    history: History,
    keyspaces: Mapping[str, KeyspaceDef],
    final: Mapping[tuple[str, str], Record | None],
    replicas: Mapping[tuple[str, str], Mapping[str, Record | None]],
    hints_left: int = 0,
    vv_limit: int = 10,
    movements: Sequence[tuple[float, float]] = (),
) -> CheckResult:
    """Judge a history. `final` is each key's converged record (the merge of its replicas),
    `replicas` each key's record per home replica after the heal, `movements` the (start, end)
    times during which the ring was changing (see the module docstring on stale reads)."""
    violations: list[Violation] = []
    facts: dict[tuple[str, str], _KeyFacts] = {}
    by_kind: dict[str, int] = {}
    ok_ops = 0
    for op in history.ops:
        by_kind[op.kind] = by_kind.get(op.kind, 0) + 1
        if op.ok:
            ok_ops += 1
        kf = facts.get((op.keyspace, op.key))
        if kf is None:
            kf = facts[(op.keyspace, op.key)] = _KeyFacts()
        if op.kind == "get":
            kf.reads.append(op)
        elif op.kind == "incr":
            kf.incrs.append(op)
        else:
            kf.writes.append(op)

    dot_of, dot_violations, twice = _learn_dots(history, final)
    violations.extend(dot_violations)
    written = {op.value: (op.keyspace, op.key) for op in history.ops if op.kind == "put"}
    for op in history.ops:
        if op.kind == "get" and op.ok and isinstance(op.record, Versioned):
            for s in op.record.siblings:
                if s.value is not None and written.get(s.value) != (op.keyspace, op.key):
                    where = written.get(s.value)
                    origin = "never written" if where is None else f"written to {where[0]}/{where[1]}"
                    violations.append(
                        Violation("phantom", op.keyspace, op.key, f"read returned {_show(s.value)}, {origin}")
                    )

    lost = stale = strict_stale = moving_stale = reads = with_sibs = max_sibs = pruned = 0
    counter_keys = increments = retries = 0
    for (ks_name, key), kf in sorted(facts.items()):
        ks = keyspaces.get(ks_name) or KeyspaceDef(ks_name)
        record = final.get((ks_name, key))
        if kf.incrs:
            counter_keys += 1
            n_ids, n_retries, bad = _check_counter(ks_name, key, kf.incrs, record)
            increments += n_ids
            retries += n_retries
            violations.extend(bad)
        if ks.policy == "counter":
            reads += sum(1 for op in kf.reads if op.ok)
            continue
        superseded_at = _superseded_at(kf.writes, dot_of)
        for op in kf.reads:
            if not op.ok:
                continue
            reads += 1
            live = _live_count(op.record)
            if live > 1:
                with_sibs += 1
            max_sibs = max(max_sibs, live)
        s, ss, ms, bad = _stale_reads(ks, key, kf, superseded_at, movements)
        stale += s
        strict_stale += ss
        moving_stale += ms
        violations.extend(bad)
        missing = _lost_writes(ks_name, key, kf.writes, record, dot_of, superseded_at)
        lost += len(missing)
        violations.extend(missing)
        if any(op.context is not None and len(op.context) > vv_limit for op in kf.writes):
            pruned += 1
        else:
            violations.extend(_resurrections(ks_name, key, kf.writes, record, dot_of))

    for (ks_name, key), copies in sorted(replicas.items()):
        records = list(copies.values())
        if any(not same_record(records[0], other) for other in records[1:]):
            shown = ", ".join(f"{node}: {_describe(rec)}" for node, rec in sorted(copies.items()))
            violations.append(
                Violation("not_converged", ks_name, key, f"replicas differ after heal ({shown})")
            )
    if hints_left:
        violations.append(Violation("hints_left", "*", "*", f"{hints_left} hints still held after the heal"))

    acked = sum(1 for op in history.ops if op.ok and op.kind in ("put", "delete", "incr"))
    return CheckResult(
        violations=tuple(violations),
        ops=len(history.ops),
        ok_ops=ok_ops,
        by_kind=dict(sorted(by_kind.items())),
        acked_writes=acked,
        lost_writes=lost,
        stale_reads=stale,
        strict_stale_reads=strict_stale,
        reads=reads,
        reads_with_siblings=with_sibs,
        max_siblings=max_sibs,
        counter_keys=counter_keys,
        increments=increments,
        retries=retries,
        keys_checked=len(facts),
        pruned_keys=pruned,
        stored_twice=len(twice),
        moving_stale_reads=moving_stale,
    )


def count_stale_reads(history: History, keyspaces: Mapping[str, KeyspaceDef]) -> int:
    """Successful reads that lacked an acknowledged put the client knew of when it read (see the
    module docstring), without the rest of `check`: for experiments that only want the figure."""
    dot_of, _, _ = _learn_dots(history, {})
    facts: dict[tuple[str, str], _KeyFacts] = {}
    for op in history.ops:
        kf = facts.setdefault((op.keyspace, op.key), _KeyFacts())
        if op.kind == "get":
            kf.reads.append(op)
        elif op.kind in WRITES:
            kf.writes.append(op)
    stale = 0
    for (ks_name, key), kf in facts.items():
        ks = keyspaces.get(ks_name) or KeyspaceDef(ks_name)
        stale += _stale_reads(ks, key, kf, _superseded_at(kf.writes, dot_of), ())[0]
    return stale


def _live_count(record: Record | None) -> int:
    if not isinstance(record, Versioned):
        return 0
    return sum(1 for s in record.siblings if s.value is not None)


def _describe(record: Record | None) -> str:
    if record is None:
        return "nothing"
    if isinstance(record, PNCounter):
        return f"counter {record.value}"
    return "[" + " ".join(_dot_text(s.dot) for s in record.siblings) + "]"


def _records_seen(
    history: History, final: Mapping[tuple[str, str], Record | None]
) -> Iterable[tuple[str, str, Versioned]]:
    for op in history.ops:
        if op.kind == "get" and op.ok and isinstance(op.record, Versioned):
            yield op.keyspace, op.key, op.record
    for (ks, key), record in final.items():
        if isinstance(record, Versioned):
            yield ks, key, record


def _learn_dots(
    history: History, final: Mapping[tuple[str, str], Record | None]
) -> tuple[dict[bytes, Dot], list[Violation], set[bytes]]:
    """value -> dot for every value seen; violations where one dot named two different writes; and
    the values stored twice (one put under two dots with the same context: a request the network
    duplicated and a coordinator took twice, having restarted in between and forgotten the first).
    """
    dot_of: dict[bytes, Dot] = {}
    context_of_value: dict[bytes, Mapping[str, int]] = {}
    seen: dict[tuple[str, str, Dot], tuple[bytes | None, tuple[tuple[str, int], ...]]] = {}
    violations: list[Violation] = []
    twice: set[bytes] = set()
    for ks, key, record in _records_seen(history, final):
        for s in record.siblings:
            ident = (s.value, tuple(sorted(s.context.items())))
            slot = (ks, key, s.dot)
            first = seen.setdefault(slot, ident)
            if first != ident:
                violations.append(
                    Violation("dot_reused", ks, key, f"dot {_dot_text(s.dot)} names two different writes")
                )
                seen[slot] = ident  # report each change once, not on every later read
            if s.value is None:
                continue
            known = dot_of.setdefault(s.value, s.dot)
            if known == s.dot:
                context_of_value.setdefault(s.value, s.context)
            elif context_of_value.get(s.value) == s.context:
                twice.add(s.value)
            else:
                detail = f"value {_show(s.value)} seen under dots {_dot_text(known)} and {_dot_text(s.dot)}"
                violations.append(Violation("dot_reused", ks, key, detail))
    return dot_of, violations, twice


def _superseded_at(writes: list[Operation], dot_of: Mapping[bytes, Dot]) -> dict[int, float]:
    """op index -> the earliest invocation of a write whose context covered its dot.

    Only writes that may have been applied count; puts of the key whose dot nobody ever saw have
    no entry (nothing can have covered them).
    """
    appliable = sorted(
        (op for op in writes if op.context and not (op.outcome == "fail" and op.code in NOT_APPLIED)),
        key=lambda op: op.invoked,
    )
    # Per actor: invocation times and the running maximum counter of that actor in contexts, so
    # "first time some context covered (actor, n)" is one binary search.
    per_actor: dict[str, tuple[list[float], list[int]]] = {}
    for op in appliable:
        assert op.context is not None
        for actor, counter in op.context.items():
            times, tops = per_actor.setdefault(actor, ([], []))
            if not tops or counter > tops[-1]:
                times.append(op.invoked)
                tops.append(counter)
    out: dict[int, float] = {}
    for op in writes:
        if op.kind != "put" or op.value is None:
            continue
        dot = dot_of.get(op.value)
        if dot is None:
            continue
        entry = per_actor.get(dot[0])
        if entry is None:
            continue
        times, tops = entry
        i = bisect_left(tops, dot[1])
        if i < len(tops):
            out[op.index] = times[i]
    return out


def _stale_reads(
    ks: KeyspaceDef,
    key: str,
    kf: _KeyFacts,
    superseded_at: Mapping[int, float],
    movements: Sequence[tuple[float, float]],
) -> tuple[int, int, int, list[Violation]]:
    """Reads lacking an acknowledged, not yet superseded put: (stale, strict violations, strict
    ones excused by a range movement, violations)."""
    acked = sorted((op for op in kf.writes if op.kind == "put" and op.ok), key=lambda op: op.completed)
    reads = sorted((op for op in kf.reads if op.ok), key=lambda op: op.invoked)
    stale = strict_stale = moving = 0
    violations: list[Violation] = []
    active: list[Operation] = []
    i = 0
    for read in reads:
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
                    f"read #{read.index} at {read.level} (t={read.invoked:.4f}s) missed {_show(w.value)}, "
                    f"acknowledged at {w.level} at t={w.completed:.4f}s: R+W > N must intersect",
                )
            )
    return stale, strict_stale, moving, violations


def _during(op: Operation, windows: Sequence[tuple[float, float]]) -> bool:
    """Did the operation run (from invocation to answer) while the ring was changing?"""
    return any(op.invoked <= end and op.completed >= start for start, end in windows)


def _lost_writes(
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
        why = "never read back" if dot is None else f"dot {_dot_text(dot)}, no write's context covers it"
        out.append(
            Violation(
                "lost_write",
                ks,
                key,
                f"acknowledged put #{op.index} of {_show(op.value)} at {op.level} (t={op.completed:.4f}s) "
                f"is gone ({why})",
            )
        )
    return out


def _resurrections(
    ks: str, key: str, writes: list[Operation], record: Record | None, dot_of: Mapping[bytes, Dot]
) -> list[Violation]:
    if not isinstance(record, Versioned):
        return []
    own_value = {op.value: op for op in writes if op.kind == "put"}
    out: list[Violation] = []
    for s in record.siblings:
        for op in writes:
            if not op.ok or not op.context or op.context.get(s.dot[0], 0) < s.dot[1]:
                continue
            if s.value is not None and own_value.get(s.value) is op:
                continue  # a write's context never covers its own dot; be safe all the same
            what = "deleted" if op.kind == "delete" else "overwritten"
            out.append(
                Violation(
                    "resurrected",
                    ks,
                    key,
                    f"{_show(s.value)} ({_dot_text(s.dot)}) was {what} by acknowledged {op.kind} #{op.index} "
                    f"(t={op.completed:.4f}s) and came back",
                )
            )
            break
    return out


def _check_counter(
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
