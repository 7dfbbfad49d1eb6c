"""Messages as wire values: round trips, the closed registry, and keyspace definitions decoded once."""

from __future__ import annotations

import pytest

from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.protocol.client_messages import GetRequest
from bhandar_cli.core.protocol.messages import ReplicaRead
from bhandar_cli.core.wire import from_wire, to_wire


def test_messages_round_trip() -> None:
    for msg in (ReplicaRead(3, KeyspaceDef("kv", "lww", 5, "strict"), "k"), GetRequest(1, "kv", "k", "ONE")):
        assert from_wire(to_wire(msg)) == msg


def test_a_keyspace_definition_seen_before_is_the_same_instance() -> None:
    first = from_wire(to_wire(ReplicaRead(1, KeyspaceDef("carts"), "a")))
    second = from_wire(to_wire(ReplicaRead(2, KeyspaceDef("carts"), "b")))
    assert first.keyspace is second.keyspace
    other = from_wire(to_wire(ReplicaRead(3, KeyspaceDef("carts", n=5), "c")))
    assert other.keyspace == KeyspaceDef("carts", n=5) and other.keyspace is not first.keyspace


def test_a_form_with_fields_other_than_str_and_int_is_built_as_sent() -> None:
    plain = to_wire(KeyspaceDef("carts"))
    assert from_wire(plain) is from_wire(dict(plain))  # interned
    as_float = {**plain, "n": 3.0}  # equal to 3 as a dict key, but not the same field
    assert type(from_wire(as_float).n) is float


def test_a_malformed_definition_is_refused_every_time() -> None:
    bad = {**to_wire(KeyspaceDef("carts")), "policy": "nonsense"}
    for _ in range(2):
        with pytest.raises(ValueError, match="malformed KeyspaceDef"):
            from_wire(bad)
    with pytest.raises(ValueError, match="malformed KeyspaceDef"):
        from_wire({**to_wire(KeyspaceDef("carts")), "extra": 1})
