"""The versioned disk format of records: round trips, the first (unversioned) format still read,
newer versions refused by name and never lost, and digests that do not depend on it."""

from __future__ import annotations

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bhandar_cli.core.model.crdt import PNCounter
from bhandar_cli.core.model.record_digest import digest
from bhandar_cli.core.model.records import Record, Versioned, from_plain, merge_records, to_plain
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.storage.storage_errors import StorageError
from bhandar_cli.store import record_format
from bhandar_cli.store.record_format import (
    FORMAT_VERSION,
    RECORD_TAG,
    RecordFormatError,
    decode_data,
    decode_hint,
    decode_meta,
    encode_data,
    encode_hint,
    encode_meta,
    merge_stored,
)
from tests.support.record_samples import (
    FORMAT1_DATA,
    FORMAT1_DIGESTS,
    FORMAT1_HINT,
    LWW,
    SAMPLES,
    counters,
    records,
    versioned,
)

policied = versioned().flatmap(
    lambda r: st.tuples(st.sampled_from(["siblings", "lww"]), st.just(r))
) | st.tuples(st.just("counter"), counters)


# The start of every format-2 value after the array head: the tag RECORD_TAG, then the version.
VERSION_HEAD = b"\xd9\xbd\xa0" + bytes([FORMAT_VERSION])


def newer_value(kind: str, *body: object, version: int = FORMAT_VERSION + 1) -> bytes:
    """A value as a later build might write it: same envelope, a layout this build does not know."""
    return cbor2.dumps([cbor2.CBORTag(RECORD_TAG, version), kind, *body])


def sib(actor: str, n: int, value: bytes | None, ctx: dict[str, int] | None = None) -> Sibling:
    return Sibling((actor, n), ctx or {}, value, ts=float(n))


# --- round trips -------------------------------------------------------------------------------


@settings(deadline=None)
@given(policied)
def test_data_values_round_trip(pair: tuple[str, Record]) -> None:
    policy, record = pair
    raw = encode_data(policy, record)
    assert raw[1:5] == VERSION_HEAD  # every value this build writes is versioned
    assert decode_data(raw, "r") == (policy, record)


@settings(deadline=None)
@given(st.floats(allow_nan=False), records)
def test_hints_round_trip(created: float, record: Record) -> None:
    assert decode_hint(encode_hint(created, record), "h") == (created, record)


@given(st.recursive(st.none() | st.integers() | st.text(max_size=5), lambda c: st.lists(c, max_size=3)))
def test_metadata_round_trips_as_plain_cbor(value: object) -> None:
    assert encode_meta(value) == cbor2.dumps(value)
    assert decode_meta(encode_meta(value), "m") == value


@settings(deadline=None)
@given(versioned(), versioned(), st.sampled_from(["siblings", "lww"]), st.booleans())
def test_merge_operator_is_the_record_merge_in_either_format(
    a: Versioned, b: Versioned, policy: str, older_in_format1: bool
) -> None:
    newer = encode_data(policy, a)
    older = cbor2.dumps([policy, to_plain(b)]) if older_in_format1 else encode_data(policy, b)
    merged = merge_stored(newer, older)
    # Identical bytes are one value already (the engine's rule too); anything else is merged.
    expected = a if newer == older else merge_records(policy, a, b)
    assert decode_data(merged, "r") == (policy, expected)
    assert merged[1:5] == VERSION_HEAD  # a format-1 operand comes out in format 2


def test_a_merge_that_returns_an_operand_returns_its_bytes_if_they_are_this_format() -> None:
    small = Versioned((sib("A", 1, b"x"),))
    big = Versioned((sib("A", 1, b"x"), sib("B", 1, b"y")))
    newer, older = encode_data("siblings", big), encode_data("siblings", small)
    assert merge_stored(newer, older) is newer  # no decode-encode round trip
    assert merge_stored(older, newer) is newer
    format1 = cbor2.dumps(["siblings", to_plain(big)])
    out = merge_stored(older, format1)
    assert out != format1 and out[1:5] == VERSION_HEAD and decode_data(out) == ("siblings", big)


def test_hints_and_metadata_are_replaced_whole_by_the_merge_operator() -> None:
    assert merge_stored(encode_hint(2.0, LWW), encode_hint(1.0, LWW)) == encode_hint(2.0, LWW)
    assert merge_stored(encode_hint(2.0, LWW), FORMAT1_HINT) == encode_hint(2.0, LWW)
    assert merge_stored(encode_meta(7), encode_meta(6)) == encode_meta(7)
    assert merge_stored(encode_meta(["ks", "siblings"]), encode_meta(["ks", "lww"])) == encode_meta(
        ["ks", "siblings"]
    )


# --- the first format ----------------------------------------------------------------------------


@pytest.mark.parametrize("policy", sorted(SAMPLES))
def test_first_format_data_values_are_read(policy: str) -> None:
    assert decode_data(FORMAT1_DATA[policy], "r") == (policy, SAMPLES[policy])


@pytest.mark.parametrize("policy", sorted(SAMPLES))
def test_the_plain_form_inside_every_format_has_not_changed(policy: str) -> None:
    # Formats 1 and 2 and the wire all carry `to_plain`: a change to it must come with new format
    # and protocol versions, and this test says so before old values stop decoding.
    plain_then = cbor2.dumps(cbor2.loads(FORMAT1_DATA[policy])[1])
    assert cbor2.dumps(to_plain(SAMPLES[policy])) == plain_then


def test_first_format_hint_is_read() -> None:
    assert decode_hint(FORMAT1_HINT, "h") == (7.5, LWW)


@pytest.mark.parametrize("policy", sorted(SAMPLES))
@pytest.mark.patches_compiled
def test_digest_does_not_depend_on_the_disk_format(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    record = SAMPLES[policy]
    from_format1 = decode_data(FORMAT1_DATA[policy], "r")[1]
    current = encode_data(policy, record)
    from_format2 = decode_data(current, "r")[1]
    # A made-up later disk encoding: another version, the record's plain form reversed.
    monkeypatch.setattr(record_format, "FORMAT_VERSION", 9)
    monkeypatch.setattr(record_format, "to_plain", lambda r: to_plain(r)[::-1])
    monkeypatch.setattr(record_format, "from_plain", lambda plain: from_plain(plain[::-1]))
    changed = encode_data(policy, record)
    assert changed != current and cbor2.loads(changed)[0] == cbor2.CBORTag(RECORD_TAG, 9)
    from_changed = decode_data(changed, "r")[1]
    assert from_format1 == from_format2 == from_changed == record
    assert digest(from_format1) == digest(from_format2) == digest(from_changed) == digest(record)
    assert digest(record).hex() == FORMAT1_DIGESTS[policy]


# --- values this build cannot read ---------------------------------------------------------------


def test_a_newer_version_is_refused_by_name() -> None:
    raw = newer_value("data", "siblings", "some future layout")
    with pytest.raises(RecordFormatError) as caught:
        decode_data(raw, "record ks/k")
    error = caught.value
    assert isinstance(error, StorageError) and error.version == FORMAT_VERSION + 1
    assert f"record format version {FORMAT_VERSION + 1}" in str(error) and "record ks/k" in str(error)
    assert "newer Bhandar" in str(error) and f"versions 1 to {FORMAT_VERSION}" in str(error)
    with pytest.raises(RecordFormatError, match=f"version {FORMAT_VERSION + 1}"):
        decode_hint(newer_value("hint", 1.0, "x"), "a hint")
    with pytest.raises(RecordFormatError, match=f"version {FORMAT_VERSION + 1}"):
        decode_meta(newer_value("meta", 3), "metadata 'epoch'")


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\x00",  # not CBOR
        cbor2.dumps("just text"),
        cbor2.dumps(["siblings", ["x", []]]),  # a record kind that does not exist
        cbor2.dumps(["no-such-policy", ["v", []]]),
        cbor2.dumps(cbor2.CBORTag(RECORD_TAG, ["data", "siblings", ["v", []]])),  # no array around
        cbor2.dumps([cbor2.CBORTag(RECORD_TAG + 1, 2), "data", "siblings", ["v", []]]),
        cbor2.dumps([cbor2.CBORTag(RECORD_TAG, "2"), "data", "siblings", ["v", []]]),
        cbor2.dumps([cbor2.CBORTag(RECORD_TAG, 1), "data", "siblings", ["v", []]]),  # format 1 had none
        cbor2.dumps([cbor2.CBORTag(RECORD_TAG, 2)]),  # no kind
        cbor2.dumps([cbor2.CBORTag(RECORD_TAG, 2), "hint", 1.0, ["v", []]]),  # a hint where data belongs
        cbor2.dumps([cbor2.CBORTag(RECORD_TAG, 2), "held", []]),
    ],
)
def test_malformed_values_are_refused_without_a_version(raw: bytes) -> None:
    with pytest.raises(RecordFormatError) as caught:
        decode_data(raw, "record ks/k")
    assert caught.value.version is None and "record ks/k" in str(caught.value)


def test_a_write_meeting_an_unreadable_record_keeps_both_and_the_fold_order_does_not_matter() -> None:
    future = newer_value("data", "siblings", {"opaque": b"\x01"})
    a = encode_data("siblings", Versioned((sib("A", 1, b"a"),)))
    b = encode_data("siblings", Versioned((sib("B", 1, b"b"),)))
    held = merge_stored(a, future)
    stored = cbor2.loads(held)
    assert stored[:2] == [cbor2.CBORTag(RECORD_TAG, FORMAT_VERSION), "held"]
    assert future in stored[2] and a in stored[2]
    with pytest.raises(RecordFormatError, match=f"version {FORMAT_VERSION + 1}") as caught:
        decode_data(held, "record ks/k")
    assert caught.value.version == FORMAT_VERSION + 1
    # The engine folds operands in whatever grouping its runs give: every grouping, one value.
    left = merge_stored(b, merge_stored(a, future))
    right = merge_stored(merge_stored(b, a), future)
    assert left == right
    assert merge_stored(left, future) == left  # the same operand again adds nothing
    # A newer build merging a format-2 held value finds every operand; so does this one, when it can.
    readable_held = record_format._dump("held", [a, b])
    assert decode_data(readable_held, "r") == decode_data(merge_stored(a, b), "r")


def test_an_unreadable_hint_or_metadata_value_is_replaced_by_a_newer_one() -> None:
    assert merge_stored(encode_hint(1.0, LWW), newer_value("hint", "?")) == encode_hint(1.0, LWW)
    assert merge_stored(encode_meta(1), newer_value("meta", "?")) == encode_meta(1)


def test_counter_records_are_kept_beside_an_unreadable_one_too() -> None:
    counter = encode_data("counter", PNCounter({}).increment("A", 3, "r1"))
    held = merge_stored(counter, newer_value("data", "counter", "?"))
    assert counter in cbor2.loads(held)[2]
