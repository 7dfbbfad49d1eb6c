"""Bloom filters for SSTables, and a measurement of their false-positive rate.

One 64-bit hash per key (BLAKE2b with an 8-byte digest: in the standard library, stable across
processes unlike `hash()`, and about as fast in CPython as anything else callable per key), split
into two 32-bit halves h1, h2; probe i sets bit (h1 + i·h2) mod m (Kirsch & Mitzenmacher, "Less
Hashing, Same Performance", 2006: double hashing keeps the false-positive rate of k independent
hashes). A key is hashed once per `get` and the hash is reused for every table's filter.

Serialized form: `version u8 | hashes u8 | m_bits u64 | bitmap` (bit p is byte p>>3, bit p&7).
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterable
from random import Random

_HEADER = struct.Struct("<BBQ")
_VERSION = 1
_MASK32 = 0xFFFFFFFF
_blake2b = hashlib.blake2b
_from_bytes = int.from_bytes

DEFAULT_BITS_PER_KEY = 10
DEFAULT_HASHES = 7


def bloom_hash(key: bytes) -> int:
    """The 64-bit hash every filter probes with."""
    return _from_bytes(_blake2b(key, digest_size=8).digest(), "little")


def theoretical_fp_rate(bits_per_key: float, hashes: int) -> float:
    """(1 - e^(-k/b))^k: the classic approximation for k hashes and b bits per key."""
    return (1.0 - math.exp(-hashes / bits_per_key)) ** hashes


class BloomFilter:
    """A fixed-size Bloom filter over 64-bit key hashes."""

    __slots__ = ("bits", "hashes", "m")

    def __init__(
        self, m_bits: int, hashes: int = DEFAULT_HASHES, bits: bytes | bytearray | None = None
    ) -> None:
        if m_bits < 1 or not 1 <= hashes <= 64:
            raise ValueError(
                f"a Bloom filter needs ≥1 bit and 1..64 hashes, got {m_bits} bits, {hashes} hashes"
            )
        nbytes = (m_bits + 7) // 8
        if bits is not None and len(bits) != nbytes:
            raise ValueError(f"bitmap of {len(bits)} bytes does not fit {m_bits} bits")
        self.m = m_bits
        self.hashes = hashes
        self.bits: bytes | bytearray = bytearray(nbytes) if bits is None else bits

    @classmethod
    def for_keys(
        cls, n_keys: int, bits_per_key: int = DEFAULT_BITS_PER_KEY, hashes: int = DEFAULT_HASHES
    ) -> BloomFilter:
        return cls(max(64, n_keys * bits_per_key), hashes)

    def add_hash(self, h: int) -> None:
        self.add_hashes((h,))

    def add_hashes(self, hashes: Iterable[int]) -> None:
        """`add_hash` for many keys, with the loop state kept in locals (flushes build filters)."""
        bits, m, k = self.bits, self.m, self.hashes
        if not isinstance(bits, bytearray):
            raise TypeError("a Bloom filter read from a table is read-only (a bug: tables are immutable)")
        for h in hashes:
            p, d = (h & _MASK32) % m, (h >> 32) % m
            for _ in range(k):
                bits[p >> 3] |= 1 << (p & 7)
                p += d
                if p >= m:
                    p -= m

    def add(self, key: bytes) -> None:
        self.add_hash(bloom_hash(key))

    def may_contain_hash(self, h: int) -> bool:
        """False means certainly absent; True means probably present."""
        bits, m = self.bits, self.m
        p, d = (h & _MASK32) % m, (h >> 32) % m
        for _ in range(self.hashes):
            if not (bits[p >> 3] >> (p & 7)) & 1:
                return False
            p += d
            if p >= m:
                p -= m
        return True

    def may_contain(self, key: bytes) -> bool:
        return self.may_contain_hash(bloom_hash(key))

    def to_bytes(self) -> bytes:
        return _HEADER.pack(_VERSION, self.hashes, self.m) + bytes(self.bits)

    @classmethod
    def from_bytes(cls, data: bytes) -> BloomFilter:
        """Parse a serialized filter; ValueError if it is not one (the caller names the file)."""
        if len(data) < _HEADER.size:
            raise ValueError(f"Bloom filter of {len(data)} bytes is shorter than its header")
        version, hashes, m = _HEADER.unpack_from(data)
        if version != _VERSION:
            raise ValueError(f"Bloom filter format version {version} is not {_VERSION}")
        return cls(m, hashes, data[_HEADER.size :])


def measure_false_positive_rate(
    bits_per_key: int = DEFAULT_BITS_PER_KEY,
    hashes: int = DEFAULT_HASHES,
    keys: int = 100_000,
    seed: int = 0,
    probes: int | None = None,
) -> dict[str, float | int]:
    """Insert `keys` random keys, probe with as many absent keys (or `probes`), count false hits.

    Rates are fractions (0.0082, not 0.82). Keys are random 16-byte strings from
    `random.Random(seed)`, so a run is reproducible.
    """
    if keys < 1 or bits_per_key < 1:
        raise ValueError("keys and bits_per_key must be positive")
    rng = Random(seed)
    bloom = BloomFilter(keys * bits_per_key, hashes)
    present = {rng.randbytes(16) for _ in range(keys)}
    for key in present:
        bloom.add(key)
    n_probes = keys if probes is None else probes
    false_positives = tested = 0
    while tested < n_probes:
        key = rng.randbytes(16)
        if key in present:  # astronomically unlikely; skip rather than count a true positive
            continue
        tested += 1
        false_positives += bloom.may_contain(key)
    measured = false_positives / tested
    theoretical = theoretical_fp_rate(bits_per_key, hashes)
    return {
        "bits_per_key": bits_per_key,
        "hashes": hashes,
        "keys": len(present),
        "probes": tested,
        "false_positives": false_positives,
        "measured": measured,
        "theoretical": theoretical,
        "relative_error": (measured - theoretical) / theoretical,
        "bytes": len(bloom.bits),
    }
