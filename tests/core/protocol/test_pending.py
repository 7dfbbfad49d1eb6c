"""Ops in flight: the op table's ids and deadlines, the frozen op kinds, and how a client is answered."""

from __future__ import annotations

import dataclasses
import math

import pytest

from bhandar_cli import native
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.protocol.client_messages import Failure, GetResult, PutRequest, PutResult
from bhandar_cli.core.protocol.messages import ClientReply, Respond, Send
from bhandar_cli.core.protocol.pending import (
    PendingForward,
    PendingHandoff,
    PendingPut,
    PendingRead,
    ReadProgress,
    Trace,
    WriteProgress,
    answer,
    finish,
)
from bhandar_cli.core.protocol.pending_table import IdSource, PendingTable
from bhandar_cli.core.protocol.value_fields import field_names, replaced


def forward(deadline: float, target: str = "B") -> PendingForward:
    request = PutRequest(7, "ks", "k", b"1", "application/json", None)
    return PendingForward(
        rid=7,
        origin=None,
        deadline=deadline,
        target=target,
        request=request,
        tried=(target,),
        sent=0.0,
        trace=None,
    )


def put_op(started: float, trace: Trace | None = None, origin: str | None = None) -> PendingPut:
    return PendingPut(
        verb="put",
        rid=42,
        origin=origin,
        started=started,
        deadline=started + 1.0,
        level="QUORUM",
        keyspace="ks",
        key="k",
        needed=2,
        targets=("A", "B", "C"),
        hinted=(),
        warnings=(),
        trace=trace,
        progress=WriteProgress({"A"}),
    )


def test_op_ids_come_from_the_shared_source_in_order() -> None:
    ids = IdSource(1000)
    table = PendingTable(ids)
    first = table.add(forward(1.0))
    session = ids.take()  # a repair session or stream takes the next id in between
    second = table.add(forward(2.0))
    assert (first, session, second) == (1000, 1001, 1002)
    assert table.get(first) == forward(1.0) and table.get(second) == forward(2.0)


def test_expired_returns_ops_past_their_deadline_earliest_first_and_forgets_them() -> None:
    table = PendingTable(IdSource(1))
    late = table.add(forward(3.0, "late"))
    early = table.add(forward(1.0, "early"))
    middle = table.add(forward(2.0, "middle"))
    assert table.expired(0.5) == []
    due = table.expired(2.0)
    assert [(i, op) for i, op in due] == [(early, forward(1.0, "early")), (middle, forward(2.0, "middle"))]
    assert table.get(early) is None and table.get(middle) is None and len(table) == 1
    assert table.expired(2.5) == []
    assert [i for i, _ in table.expired(10.0)] == [late]
    assert len(table) == 0


def test_a_finished_op_never_expires_and_does_not_hold_the_next_deadline() -> None:
    table = PendingTable(IdSource(1))
    done = table.add(forward(1.0))
    table.add(forward(5.0))
    assert table.next_deadline() == 1.0
    table.discard(done)  # answered before its deadline
    assert table.next_deadline() == 5.0
    assert table.expired(2.0) == []
    assert [op.deadline for _, op in table.expired(5.0)] == [5.0]
    assert table.next_deadline() == math.inf


def test_ops_are_frozen_but_their_progress_changes() -> None:
    op = put_op(0.0)
    # Its fields are Final: mypy refuses to set one (the ignore below would be unused otherwise), and
    # a compiled build refuses it at run time too. No build lets an op grow a field.
    with pytest.raises(AttributeError):
        op.extra = 1  # type: ignore[attr-defined]
    if native.MODE == "compiled":
        with pytest.raises(AttributeError):
            op.needed = 1  # type: ignore[misc]
    op.progress.acks.add("B")
    op.progress.failed["C"] = "full"
    op.progress.answered = True
    assert op.progress == WriteProgress({"A", "B"}, {"C": "full"}, True)


def test_each_kind_has_only_its_own_fields() -> None:
    def names(cls: type) -> set[str]:
        return (
            {f.name for f in dataclasses.fields(cls)}
            if dataclasses.is_dataclass(cls)
            else set(field_names(cls))
        )

    assert "progress" not in names(PendingForward) | names(PendingHandoff)
    assert names(PendingHandoff) == {"deadline", "target", "keyspace", "key", "record"}
    assert "fallbacks" in names(PendingRead) and "fallbacks" not in names(PendingPut)
    assert "warnings" in names(PendingPut) and "warnings" not in names(PendingRead)


def test_answer_goes_to_the_local_client_or_back_to_the_forwarding_node() -> None:
    result = Failure("timeout", "slow")
    assert answer(5, None, result, durable=True) == Respond(5, result, True)
    assert answer(5, "B", result) == Send("B", ClientReply(5, result), False)


def test_finish_closes_the_ops_trace() -> None:
    trace = Trace(10.0)
    trace.note(10.001, "coordinates")
    op = put_op(10.0, trace, origin="C")
    effect = finish(10.004, op, PutResult("A", 2, 2), durable=True)
    assert isinstance(effect, Send) and effect.dst == "C" and effect.durable
    assert isinstance(effect.msg, ClientReply) and effect.msg.rid == 42
    result = effect.msg.result
    assert isinstance(result, PutResult)
    assert result.trace == ((1.0, "coordinates"), (4.0, "answered the client"))


def test_finish_of_a_failed_read_notes_the_failure_in_its_trace() -> None:
    op = PendingRead(
        rid=9,
        origin=None,
        started=0.0,
        deadline=1.0,
        level="ONE",
        keyspace="ks",
        key="k",
        needed=1,
        targets=("A",),
        fallbacks=frozenset(),
        trace=Trace(0.0),
        progress=ReadProgress(),
    )
    effect = finish(1.0, op, Failure("timeout", "no replica answered"))
    assert isinstance(effect, Respond) and isinstance(effect.result, Failure)
    assert effect.result.trace == ((1000.0, "failed: no replica answered"),)
    untraced = replaced(op, trace=None)
    plain = finish(1.0, untraced, GetResult("A", Versioned(()), 1, 1))
    assert isinstance(plain, Respond) and isinstance(plain.result, GetResult) and plain.result.trace == ()
