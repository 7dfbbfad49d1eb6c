"""The chaos checker on small hand-written histories: each property caught, and its exceptions."""

from __future__ import annotations

from typing import Any

from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.model.crdt import EMPTY_COUNTER
from bhandar_cli.core.model.records import Record, Versioned
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.core.protocol.client_messages import Failure, GetResult, IncrResult, PutResult
from bhandar_cli.sim.checker.check import check_history, count_stale_reads
from bhandar_cli.sim.history import History, Operation

SLOPPY = KeyspaceDef("sibs")
STRICT = KeyspaceDef("strict", quorum="strict")
TALLY = KeyspaceDef("tally", policy="counter")
KEYSPACES = {ks.name: ks for ks in (SLOPPY, STRICT, TALLY)}
OK = PutResult("A", 2, 2)


def rec(*siblings: Sibling) -> Versioned:
    return Versioned(tuple(sorted(siblings, key=lambda s: s.dot)))


def sib(actor: str, n: int, value: str | None, **context: int) -> Sibling:
    return Sibling((actor, n), context, None if value is None else value.encode())


def put(
    h: History, t: float, value: str, ctx: dict[str, int] | None = None, ks: str = "sibs", **kw: object
) -> Operation:
    op = h.invoke(t, 0, "put", ks, "k", str(kw.get("level", "QUORUM")), value.encode(), ctx)
    h.complete(op, t + 0.01, kw.get("result", OK))  # type: ignore[arg-type]
    return op


def read(h: History, t: float, record: Record | None, ks: str = "sibs", level: str = "QUORUM") -> Operation:
    op = h.invoke(t, 0, "get", ks, "k", level)
    h.complete(op, t + 0.01, GetResult("A", record, 2, 2))
    return op


def kinds(
    h: History, final: Record | None, ks: str = "sibs", replicas: Any = None, **kw: object
) -> list[str]:
    result = check_history(h, KEYSPACES, {(ks, "k"): final}, replicas or {}, **kw)  # type: ignore[arg-type]
    return [v.kind for v in result.violations]


def test_an_acknowledged_put_nobody_read_and_gone_is_lost() -> None:
    h = History()
    put(h, 1.0, "x")
    assert kinds(h, None) == ["lost_write"]
    assert kinds(h, rec(sib("A", 1, "x"))) == []


def test_a_put_superseded_by_a_write_whose_context_covered_it_is_not_lost() -> None:
    h = History()
    put(h, 1.0, "x")
    read(h, 2.0, rec(sib("A", 1, "x")))
    put(h, 3.0, "y", {"A": 1})
    assert kinds(h, rec(sib("A", 2, "y", A=1))) == []
    h2 = History()
    put(h2, 1.0, "x")
    read(h2, 2.0, rec(sib("A", 1, "x")))
    put(h2, 3.0, "y", {"B": 1})  # a context that does not cover A:1
    assert kinds(h2, rec(sib("A", 2, "y", B=1))) == ["lost_write"]


def test_a_write_refused_before_storing_cannot_supersede() -> None:
    h = History()
    put(h, 1.0, "x")
    read(h, 2.0, rec(sib("A", 1, "x")))
    put(h, 3.0, "y", {"A": 1}, result=Failure("unavailable", "no"))
    assert kinds(h, None) == ["lost_write"]


def test_a_deleted_value_that_comes_back_is_a_resurrection() -> None:
    h = History()
    put(h, 1.0, "x")
    read(h, 2.0, rec(sib("A", 1, "x")))
    delete = h.invoke(3.0, 0, "delete", "sibs", "k", "QUORUM", None, {"A": 1})
    h.complete(delete, 3.1, OK)
    assert kinds(h, rec(sib("A", 2, None, A=1))) == []
    assert kinds(h, rec(sib("A", 1, "x"), sib("A", 2, None, A=1))) == ["resurrected"]


def test_resurrection_is_judged_however_large_the_context() -> None:
    # The store never prunes a context, so no key is exempt (the checker skipped keys whose
    # contexts had more than 10 entries while the store pruned them).
    h = History()
    put(h, 1.0, "x")
    big = {f"N{i}": 1 for i in range(11)} | {"A": 1}
    delete = h.invoke(3.0, 0, "delete", "sibs", "k", "QUORUM", None, big)
    h.complete(delete, 3.1, OK)
    assert kinds(h, rec(sib("A", 1, "x"))) == ["resurrected"]


def test_a_context_covers_an_exact_dot_it_names_and_no_other() -> None:
    h = History()
    put(h, 1.0, "x")
    read(h, 1.5, rec(sib("B~x", 3, "x")))
    delete = h.invoke(3.0, 0, "delete", "sibs", "k", "QUORUM", None, {"B~x:3": 3})
    h.complete(delete, 3.1, OK)
    assert kinds(h, rec(sib("B~x", 3, "x"))) == ["resurrected"]
    assert kinds(h, rec(sib("B~x", 4, None, **{"B~x:3": 3}))) == []
    h2 = History()
    put(h2, 1.0, "x")
    read(h2, 1.5, rec(sib("B~x", 2, "x")))
    other = h2.invoke(3.0, 0, "delete", "sibs", "k", "QUORUM", None, {"B~x:3": 3})
    h2.complete(other, 3.1, OK)  # names B~x:3 alone: B~x:2 is not covered
    assert kinds(h2, rec(sib("B~x", 2, "x"))) == []


def test_a_value_beside_a_put_whose_context_had_seen_it_is_a_false_sibling() -> None:
    """What `bhandar check -w dynamo-kv` saw at seed 202: one put stored under two dots, a write
    over one of them, and the other coming back beside it."""
    h = History()
    put(h, 1.0, "x")
    read(h, 2.0, rec(sib("C", 5, "x")))  # one copy of the put
    put(h, 3.0, "y", {"C": 5})  # written over it
    beside = rec(sib("D", 1, "x"), sib("C", 6, "y", C=5))  # the other copy, beside the write
    read(h, 4.0, beside)
    assert "false_sibling" in kinds(h, rec(sib("C", 6, "y", C=5)))
    h2 = History()  # the same values as true siblings: "y" was written blind
    put(h2, 1.0, "x")
    read(h2, 2.0, rec(sib("C", 5, "x")))
    put(h2, 3.0, "y")
    read(h2, 4.0, rec(sib("C", 5, "x"), sib("C", 6, "y")))
    assert kinds(h2, rec(sib("C", 5, "x"), sib("C", 6, "y"))) == []


def test_stale_reads_are_counted_and_break_strict_quorums_only() -> None:
    for ks, expected in (("sibs", []), ("strict", ["stale_read_strict"])):
        h = History()
        put(h, 1.0, "x", ks=ks)
        read(h, 2.0, None, ks=ks)  # QUORUM read after a QUORUM ack: must intersect when strict
        assert kinds(h, rec(sib("A", 1, "x")), ks=ks) == expected
        assert count_stale_reads(h, KEYSPACES) == 1


def test_a_read_concurrent_with_the_ack_or_weak_levels_is_not_stale_strictly() -> None:
    h = History()
    put(h, 1.0, "x", ks="strict")  # acknowledged at 1.01
    read(h, 1.005, None, ks="strict")  # invoked before the client had the ack
    put(h, 2.0, "y", ks="strict", level="ONE")
    read(h, 3.0, rec(sib("A", 1, "x")), ks="strict", level="ONE")  # R + W = 2 <= N
    final = rec(sib("A", 1, "x"), sib("A", 2, "y"))
    assert kinds(h, final, ks="strict") == []
    assert count_stale_reads(h, KEYSPACES) == 1


def test_counters_must_lie_between_acked_and_attempted() -> None:
    h = History()
    for rid, delta, ok in (("r1", 5, True), ("r1", 5, True), ("r2", 3, False), ("r3", -2, False)):
        op = h.invoke(1.0, 0, "incr", "tally", "k", "QUORUM", request_id=rid, delta=delta)
        h.complete(op, 1.1, IncrResult("A", 0, 2, 2) if ok else Failure("timeout", "slow"))
    counter = EMPTY_COUNTER
    for value, expected in ((5, []), (8, []), (3, []), (2, ["counter"]), (9, ["counter"]), (10, ["counter"])):
        c = counter.increment("A", value, "x") if value >= 0 else counter
        result = check_history(h, KEYSPACES, {("tally", "k"): c}, {})
        assert [v.kind for v in result.violations] == expected, value
        assert result.increments == 3 and result.retries == 1


def test_replicas_that_disagree_after_the_heal_are_reported() -> None:
    h = History()
    put(h, 1.0, "x")
    final = rec(sib("A", 1, "x"))
    assert kinds(h, final, replicas={("sibs", "k"): {"A": final, "B": final}}) == []
    assert kinds(h, final, replicas={("sibs", "k"): {"A": final, "B": None}}) == ["not_converged"]
    assert kinds(h, final, hints_left=2) == ["hints_left"]


def test_one_dot_naming_two_writes_is_reported() -> None:
    h = History()
    put(h, 1.0, "x")
    put(h, 1.5, "y")
    read(h, 2.0, rec(sib("A", 1, "x")))
    read(h, 3.0, rec(sib("A", 1, "y")))
    assert "dot_reused" in kinds(h, rec(sib("A", 1, "y")))


def test_one_put_stored_twice_with_its_context_is_counted_not_a_violation() -> None:
    h = History()
    put(h, 1.0, "x")
    twice = rec(sib("A", 1, "x"), sib("A", 2, "x"))
    read(h, 2.0, twice)
    result = check_history(h, KEYSPACES, {("sibs", "k"): twice}, {})
    assert result.violations == () and result.stored_twice == 1
    h2 = History()
    put(h2, 1.0, "x")
    read(h2, 2.0, rec(sib("A", 1, "x"), sib("A", 2, "x", B=1)))  # different contexts: two writes
    assert "dot_reused" in kinds(h2, rec(sib("A", 1, "x")))


def test_a_value_from_another_key_is_a_phantom() -> None:
    h = History()
    other = h.invoke(1.0, 0, "put", "sibs", "other", "QUORUM", b"z", None)
    h.complete(other, 1.1, OK)
    read(h, 2.0, rec(sib("A", 1, "z")))
    final = {("sibs", "k"): None, ("sibs", "other"): rec(sib("A", 1, "z"))}
    result = check_history(h, KEYSPACES, final, {})
    assert [v.kind for v in result.violations] == ["phantom"]


def test_a_late_answer_does_not_change_an_operation_the_client_gave_up_on() -> None:
    h = History()
    op = h.invoke(1.0, 0, "put", "sibs", "k", "QUORUM", b"x", None)
    h.fail(op, 3.0, "timeout", "client_timeout")
    h.complete(op, 3.5, OK)
    assert (op.outcome, op.completed) == ("timeout", 3.0)
    assert kinds(h, None) == []  # never acknowledged, so never owed


def test_a_strict_stale_read_of_a_write_made_during_a_range_movement_is_counted_apart() -> None:
    """While nodes disagree on the ring, a write to the new replicas can miss a read of the old."""
    h = History()
    put(h, 1.0, "x", ks="strict")  # runs from 1.0 to 1.01
    read(h, 2.0, None, ks="strict")
    final = rec(sib("A", 1, "x"))
    during = check_history(h, KEYSPACES, {("strict", "k"): final}, {}, movements=[(0.5, 1.005)])
    assert during.violations == () and (during.strict_stale_reads, during.moving_stale_reads) == (0, 1)
    # A movement that ended before the write began excuses nothing.
    before = check_history(h, KEYSPACES, {("strict", "k"): final}, {}, movements=[(0.1, 0.9)])
    assert [v.kind for v in before.violations] == ["stale_read_strict"]
    assert (before.strict_stale_reads, before.moving_stale_reads) == (1, 0)
