"""The chaos checker: the history of every client operation, and the properties it must satisfy.

This module owns what "the store told the truth" means. The workload records each operation as it
is invoked and completed (`History`); after the run has healed, `check` judges the history against
the final state of every key, seeing only what clients saw plus the replicas' final records. It
gathers each key's operations, learns the writes' dots (`checker_dots`), applies the per-key
properties (`checker_properties`) and checks phantoms, convergence and hints itself:

- lost writes: every acknowledged put is still a sibling of its key, or was superseded by a write
  whose context covered its dot. A client learns a write's dot only by reading it back; a write
  nobody ever read cannot have been superseded (contexts come only from reads), so an acknowledged
  value that is absent and was never read is lost.
- resurrection: no final sibling is covered by the context of an acknowledged put or delete (a
  deleted value stays deleted unless rewritten). The store never prunes a context, so no key is
  exempt.
- false siblings: no read returns a value beside a put whose context had seen that value (covered
  a dot the value was seen under): the put replaced it, so it must not be its sibling. This is the
  check a client can make (`bhandar check -w dynamo-kv` makes it from values alone); it catches a
  put stored twice, under two dots, of which a later write's context covered only one.
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
  the same context is not a violation in itself but is counted ("stored twice", whose goal is 0):
  a forwarded put carries one exact dot to every coordinator that takes it, so only a client's
  request taken twice by one coordinator (the network duplicated it and the coordinator restarted
  between the copies, forgetting the first) can still give two identical siblings. A void (the
  tombstone a forwarder stores under an exact dot no coordinator took) is nobody's write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bhandar_cli.core.model import KeyspaceDef, PNCounter, Record, Versioned, same_record
from bhandar_cli.sim import WRITES, CheckResult, History, Operation, Violation
from bhandar_cli.sim.checker.dots import dot_text, learn_dots, show_value, superseded_at
from bhandar_cli.sim.checker.properties import (
    check_counter,
    false_siblings,
    lost_writes,
    resurrections,
    stale_reads,
)


@dataclass
class _KeyFacts:
    """What the checker learned about one key, gathered in one pass over the history."""

    writes: list[Operation] = field(default_factory=list)
    reads: list[Operation] = field(default_factory=list)
    incrs: list[Operation] = field(default_factory=list)


def check_history(
    history: History,
    keyspaces: Mapping[str, KeyspaceDef],
    final: Mapping[tuple[str, str], Record | None],
    replicas: Mapping[tuple[str, str], Mapping[str, Record | None]],
    hints_left: int = 0,
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

    dot_of, dot_violations, twice, dots_of_value = learn_dots(history, final)
    violations.extend(dot_violations)
    violations.extend(false_siblings(history, dots_of_value))
    written = {op.value: (op.keyspace, op.key) for op in history.ops if op.kind == "put"}
    for op in history.ops:
        if op.kind == "get" and op.ok and isinstance(op.record, Versioned):
            for s in op.record.siblings:
                if s.value is not None and written.get(s.value) != (op.keyspace, op.key):
                    where = written.get(s.value)
                    origin = "never written" if where is None else f"written to {where[0]}/{where[1]}"
                    detail = f"read returned {show_value(s.value)}, {origin}"
                    violations.append(Violation("phantom", op.keyspace, op.key, detail))

    lost = stale = strict_stale = moving_stale = reads = with_sibs = max_sibs = 0
    counter_keys = increments = retries = 0
    for (ks_name, key), kf in sorted(facts.items()):
        ks = keyspaces.get(ks_name) or KeyspaceDef(ks_name)
        record = final.get((ks_name, key))
        if kf.incrs:
            counter_keys += 1
            n_ids, n_retries, bad = check_counter(ks_name, key, kf.incrs, record)
            increments += n_ids
            retries += n_retries
            violations.extend(bad)
        if ks.policy == "counter":
            reads += sum(1 for op in kf.reads if op.ok)
            continue
        superseded = superseded_at(kf.writes, dot_of)
        for op in kf.reads:
            if not op.ok:
                continue
            reads += 1
            live = _live_count(op.record)
            if live > 1:
                with_sibs += 1
            max_sibs = max(max_sibs, live)
        n_stale, n_strict, n_moving, bad = stale_reads(ks, key, kf.writes, kf.reads, superseded, movements)
        stale += n_stale
        strict_stale += n_strict
        moving_stale += n_moving
        violations.extend(bad)
        missing = lost_writes(ks_name, key, kf.writes, record, dot_of, superseded)
        lost += len(missing)
        violations.extend(missing)
        violations.extend(resurrections(ks_name, key, kf.writes, record))

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
        stored_twice=len(twice),
        moving_stale_reads=moving_stale,
    )


def count_stale_reads(history: History, keyspaces: Mapping[str, KeyspaceDef]) -> int:
    """Successful reads that lacked an acknowledged put the client knew of when it read (see the
    module docstring), without the rest of `check`: for experiments that only want the figure."""
    dot_of, _, _, _ = learn_dots(history, {})
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
        stale += stale_reads(ks, key, kf.writes, kf.reads, superseded_at(kf.writes, dot_of), ())[0]
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
    return "[" + " ".join(dot_text(s.dot) for s in record.siblings) + "]"
