"""The hot value classes (records' siblings, messages, effects, pendings) are plain `@final` classes
that mypyc compiles to native ones, and behave as the frozen dataclasses they replace: equal by
their fields in order, hashed and shown the same way, copied with changes by `replaced`."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import types

import pytest

from bhandar_cli import native
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.core.protocol.client_messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
)
from bhandar_cli.core.protocol.messages import (
    ClientReply,
    Ping,
    ReplicaAck,
    ReplicaRead,
    ReplicaReadReply,
    ReplicaWrite,
    Respond,
    Send,
)
from bhandar_cli.core.protocol.pending import (
    PendingIncr,
    PendingPut,
    PendingRead,
    ReadProgress,
    WriteProgress,
)
from bhandar_cli.core.protocol.value_fields import field_names, replaced

VALUE_CLASSES: tuple[type, ...] = (
    Sibling,
    Versioned,
    ClientReply,
    ReplicaWrite,
    ReplicaAck,
    ReplicaRead,
    ReplicaReadReply,
    Send,
    Respond,
    PutRequest,
    GetRequest,
    IncrRequest,
    PutResult,
    GetResult,
    IncrResult,
    Failure,
    PendingPut,
    PendingIncr,
    PendingRead,
    WriteProgress,
    ReadProgress,
)


@pytest.mark.parametrize("cls", VALUE_CLASSES, ids=lambda c: c.__name__)
def test_a_value_class_is_no_dataclass_and_is_native_when_compiled(cls: type) -> None:
    assert not dataclasses.is_dataclass(cls)
    assert field_names(cls), "a value class without fields"
    if native.MODE == "compiled":
        # Built in C (a frozen dataclass's __init__ is a Python function even compiled: dataclasses
        # generates it), with C fields: no slots of its own.
        assert not isinstance(cls.__init__, types.FunctionType)  # type: ignore[misc]
        assert "__slots__" not in vars(cls)
    else:
        assert isinstance(cls.__init__, types.FunctionType)  # type: ignore[misc]
        assert sorted(vars(cls)["__slots__"]) == sorted(field_names(cls))  # slots keep instances small


def test_equality_hash_and_repr_are_the_dataclasses() -> None:
    a = Send("B", ReplicaAck(3), durable=True)
    assert a == Send("B", ReplicaAck(3), True) and a != Send("B", ReplicaAck(4), True)
    assert a != Respond(3, Failure("timeout", "slow"))  # another class: never equal
    assert hash(a) == hash(Send("B", ReplicaAck(3), True))
    assert repr(a) == "Send(dst='B', msg=ReplicaAck(op=3, ok=True, error=''), durable=True)"
    s = Sibling(("A", 1), {"B": 2}, b"1", ts=1.5)
    assert repr(s) == "Sibling(dot=('A', 1), context={'B': 2}, value=b'1', ctype='application/json', ts=1.5)"
    assert repr(Versioned((s,))) == f"Versioned(siblings=({s!r},))"
    assert Versioned((s,)) == Versioned((Sibling(("A", 1), {"B": 2}, b"1", ts=1.5),))
    assert s != Sibling(("A", 1), {"B": 2}, b"1", ts=2.5)
    with pytest.raises(TypeError):  # a context is a dict: unhashable, as the dataclass's was
        hash(s)
    assert hash(Ping(1)) == hash(Ping(1))


def test_replaced_changes_the_named_fields_and_refuses_others() -> None:
    failure = Failure("unavailable", "down", trace=((1.0, "x"),))
    changed = replaced(failure, code="timeout")
    assert changed == Failure("timeout", "down", trace=((1.0, "x"),)) and failure.code == "unavailable"
    with pytest.raises(TypeError, match="no field colour"):
        replaced(failure, colour="red")
    assert Sibling(("A", 1), {}, b"1", ts=2.0).tombstoned() == Sibling(("A", 1), {}, None, ts=2.0)


def test_copies_and_pickles_rebuild_a_value_by_its_constructor() -> None:
    # A compiled class has no __dict__ or slots for copy and pickle to fill: they call __reduce__.
    s = Sibling(("A", 1), {"B": 2}, b"1", ts=1.5)
    reply = ClientReply(7, GetResult("A", Versioned((s,)), 2, 2), stored=None)
    assert copy.deepcopy(reply) == reply and copy.deepcopy(reply) is not reply
    assert pickle.loads(pickle.dumps(reply)) == reply
    op = PendingRead(
        rid=1,
        origin=None,
        started=0.0,
        deadline=1.0,
        level="QUORUM",
        keyspace="kv",
        key="k",
        needed=2,
        targets=("A", "B"),
        fallbacks=frozenset(),
        trace=None,
        progress=ReadProgress({"A": None}),
    )
    assert copy.deepcopy(op) == op  # keyword-only fields too
