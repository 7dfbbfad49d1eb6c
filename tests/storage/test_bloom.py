"""Bloom filter: no false negatives, the measured false-positive rate, serialization."""

from __future__ import annotations

import random

import pytest

from bhandar_cli.storage.bloom import BloomFilter, measure_false_positive_rate, theoretical_fp_rate


def test_false_positive_rate_is_within_ten_percent_of_theory_at_the_defaults() -> None:
    r = measure_false_positive_rate(seed=0)
    assert r["bits_per_key"] == 10 and r["hashes"] == 7 and r["keys"] == 100_000
    assert r["theoretical"] == pytest.approx(0.0082, abs=0.00005)  # (1 - e^-0.7)^7 = 0.82%
    assert abs(r["measured"] - r["theoretical"]) <= 0.10 * r["theoretical"], r


def test_fewer_bits_per_key_measure_a_higher_rate() -> None:
    r = measure_false_positive_rate(bits_per_key=4, hashes=3, keys=20_000, seed=1)
    assert r["theoretical"] == pytest.approx(theoretical_fp_rate(4, 3))
    assert abs(r["measured"] - r["theoretical"]) <= 0.10 * r["theoretical"], r


def test_no_false_negatives_and_serialization_round_trip() -> None:
    rng = random.Random(3)
    keys = [rng.randbytes(rng.randrange(0, 40)) for _ in range(2000)]
    bloom = BloomFilter.for_keys(len(keys))
    for k in keys:
        bloom.add(k)
    again = BloomFilter.from_bytes(bloom.to_bytes())
    assert all(again.may_contain(k) for k in keys)
    assert (again.m, again.hashes, bytes(again.bits)) == (bloom.m, bloom.hashes, bytes(bloom.bits))


def test_bad_serialized_filters_are_rejected() -> None:
    data = BloomFilter(64).to_bytes()
    with pytest.raises(ValueError, match="version"):
        BloomFilter.from_bytes(b"\x09" + data[1:])
    with pytest.raises(ValueError, match="does not fit"):
        BloomFilter.from_bytes(data[:-1])
