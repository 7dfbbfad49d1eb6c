"""The record codec's bytes are the format's, whichever way they are built: `encode_data` writes a
data value without building its envelope (store/record_format.py), and must give exactly the bytes
the envelope gives, on any record; decoding takes a context as the decoder made it only when it
is already of the right types."""

from __future__ import annotations

import cbor2
from hypothesis import given, settings
from hypothesis import strategies as st

from bhandar_cli.core.model.records import Record, Versioned, from_plain, to_plain
from bhandar_cli.store.record_format import FORMAT_VERSION, RECORD_TAG, decode_data, encode_data
from tests.support.record_samples import SAMPLES, counters, versioned

policied = versioned().flatmap(
    lambda r: st.tuples(st.sampled_from(["siblings", "lww"]), st.just(r))
) | st.tuples(st.just("counter"), counters)


def enveloped(policy: str, record: Record) -> bytes:
    """A data value as format 2 defines it: the array [tag(version), "data", policy, record]."""
    return cbor2.dumps([cbor2.CBORTag(RECORD_TAG, FORMAT_VERSION), "data", policy, to_plain(record)])


@settings(deadline=None, max_examples=500)
@given(policied)
def test_encoded_bytes_are_the_envelopes_on_any_record(pair: tuple[str, Record]) -> None:
    policy, record = pair
    raw = encode_data(policy, record)
    assert raw == enveloped(policy, record)
    assert decode_data(raw) == (policy, record)


def test_encoded_bytes_of_the_sample_records_are_the_envelopes() -> None:
    for policy, record in SAMPLES.items():
        assert encode_data(policy, record) == enveloped(policy, record)


def test_a_policy_of_no_build_is_still_enveloped() -> None:
    record = Versioned(())
    assert encode_data("someday", record) == enveloped("someday", record)


def test_a_decoded_context_of_other_types_is_converted_as_before() -> None:
    plain = ["v", [["A", 1, {"B": True, "C": 2}, b"1", "application/json", 1]]]
    (sibling,) = from_plain(plain).siblings  # type: ignore[union-attr]
    assert sibling.context == {"B": 1, "C": 2}
    assert [type(v) for v in sibling.context.values()] == [int, int]
    assert type(sibling.ts) is float
