"""The plain form of a record (what disk and wire formats carry): a round trip gives the record
back, and whatever a decoder hands in is coerced or refused as one `ValueError`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from bhandar_cli.core.model.crdt import ActorCount, PNCounter
from bhandar_cli.core.model.records import Record, from_plain, to_plain
from tests.support.record_samples import SAMPLES, records


@settings(deadline=None)
@given(records)
def test_a_record_comes_back_from_its_plain_form(record: Record) -> None:
    assert from_plain(to_plain(record)) == record


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_samples_come_back_with_exact_types(name: str) -> None:
    back = from_plain(to_plain(SAMPLES[name]))
    assert back == SAMPLES[name]
    if isinstance(back, PNCounter):
        for entry in back.actors.values():
            assert all(type(r) is str and type(d) is int for r, d in entry.ids)
            assert isinstance(entry.ids, tuple) and all(isinstance(pair, tuple) for pair in entry.ids)


def test_request_ids_of_other_types_are_coerced_as_before() -> None:
    counter = from_plain(["c", {"A": [1, 0, 1, [["r1", True], [7, 2]]]}])
    assert counter == PNCounter({"A": ActorCount(1, 0, 1, (("r1", 1), ("7", 2)))})
    assert isinstance(counter, PNCounter)
    (entry,) = counter.actors.values()
    assert [type(d) for _, d in entry.ids] == [int, int]


@pytest.mark.parametrize(
    "ids",
    [[["r1"]], [["r1", 1, 2]], [["r1", "x"]], [5], [["r1", None]]],
    ids=["short pair", "long pair", "delta not a number", "not a pair", "no delta"],
)
def test_malformed_request_ids_are_refused(ids: object) -> None:
    with pytest.raises(ValueError, match="malformed record"):
        from_plain(["c", {"A": [1, 0, 1, ids]}])
