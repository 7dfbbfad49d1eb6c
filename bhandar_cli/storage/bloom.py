"""Bloom filters for SSTables, and a measurement of their false-positive rate.

Tables written now carry a *blocked* filter (format 2, `BlockedBloom`): a key sets `hashes` bits
inside one 512-bit block of the filter (Putze, Sanders & Singler, "Cache-, Hash- and
Space-Efficient Bloom Filters", 2007; RocksDB's filter does the same per cache line). The key's
hash is `zlib.crc32(key)` (stable across processes, and some 15× cheaper per call than BLAKE2b);
the block is `h mod blocks`, and the bits are the union of two masks from fixed tables of 4,096
(`masks(hashes)`, drawn by splitmix64 from a fixed seed: part of the format), numbered by the top
24 bits of `h × 0x9E3779B97F4A7C15 mod 2^64` (`key_mask`). So a get hashes its key and makes its
mask once, and each table's check is one big-integer AND: in CPython that costs a tenth of
probing k bits one by one. One table of 4,096 masks was not enough: with some 50 keys in a
block, an absent key's mask was one of theirs 1.2 % of the time, doubling the false positives.
The price is a higher false-positive rate at the same size: 1.17 % measured at 10 bits per key
and 7 bits set, against 0.82 % for the classic filter (`blocked_fp_rate` gives 0.98 %, and
leaves out that two keys may share one of their two masks).

Serialized form of both: `version u8 | hashes u8 | m_bits u64 | bitmap`; a blocked filter's
bitmap is its blocks, each 64 bytes little-endian (m_bits is 512 × blocks).

Format 1 (`BloomFilter`, in tables written before; still read): one 64-bit hash per key
(`bloom_hash`: BLAKE2b with an 8-byte digest), split into two 32-bit halves h1, h2; probe i tests
bit (h1 + i·h2) mod m (Kirsch & Mitzenmacher, "Less Hashing, Same Performance", 2006), bit p
being byte p>>3, bit p&7. A get computes that hash only when it meets such a table.
"""

from __future__ import annotations

import hashlib
import math
import struct
import zlib
from collections.abc import Iterable, Iterator
from functools import cache
from random import Random

_HEADER = struct.Struct("<BBQ")
_VERSION, BLOCKED_VERSION = 1, 2
BLOCK_BITS = 512
_BLOCK_BYTES = BLOCK_BITS // 8
MASKS = 4096  # masks in each of the two tables
_GOLDEN64 = 0x9E3779B97F4A7C15  # Fibonacci hashing: spreads h's 32 bits into the top ones
_MASK64 = (1 << 64) - 1
_MASK32 = 0xFFFFFFFF
_blake2b = hashlib.blake2b
_from_bytes = int.from_bytes

DEFAULT_BITS_PER_KEY = 10
DEFAULT_HASHES = 7


def bloom_hash(key: bytes) -> int:
    """The 64-bit hash every filter probes with."""
    return _from_bytes(_blake2b(key, digest_size=8).digest(), "little")


filter_hash = zlib.crc32  # the hash blocked filters use (format 2)


MaskTables = tuple[tuple[int, ...], tuple[int, ...]]


def key_mask(h: int, tables: MaskTables) -> int:
    """The bits a key of hash `h` sets in its block (reads.py inlines this)."""
    x = (h * _GOLDEN64) & _MASK64
    return tables[0][x >> 52] | tables[1][(x >> 40) & 0xFFF]


def _splitmix64(seed: int) -> Iterator[int]:
    state = seed & _MASK64
    while True:
        state = (state + 0x9E3779B97F4A7C15) & _MASK64
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        yield z ^ (z >> 31)


@cache
def masks(hashes: int) -> MaskTables:
    """The two fixed tables of MASKS masks in a 512-bit block, of ceil(k/2) and floor(k/2)
    distinct bits for k = `hashes`. Part of the on-disk format. Each table deals its masks' bits
    from decks: successive shuffles of the 512 positions (Fisher-Yates, with splitmix64 outputs
    r from seed 0xB1001F17 + k picking r mod i), a position the mask already has going back under
    the deck's next card. Dealt so, every position is in the same number of masks: positions
    drawn at random instead left some in twice as many masks as others, which measured 10 %
    more false positives."""
    rng = _splitmix64(0xB1001F17 + hashes)
    both = []
    for bits in ((hashes + 1) // 2, hashes // 2):
        table = []
        deck: list[int] = []
        for _ in range(MASKS):
            mask = 0
            while mask.bit_count() < bits:
                if not deck:
                    deck = list(range(BLOCK_BITS))
                    for i in range(BLOCK_BITS - 1, 0, -1):
                        j = next(rng) % (i + 1)
                        deck[i], deck[j] = deck[j], deck[i]
                card = deck.pop()
                if mask >> card & 1:
                    deck.insert(max(0, len(deck) - 1), card)
                    continue
                mask |= 1 << card
            table.append(mask)
        both.append(tuple(table))
    return both[0], both[1]


def blocked_fp_rate(bits_per_key: float, hashes: int) -> float:
    """The false-positive rate of a blocked filter: a block holds Poisson(512/b) keys, and each
    of its bits is set by one of them with probability k/512 (Putze et al. 2007)."""
    lam, p = BLOCK_BITS / bits_per_key, hashes / BLOCK_BITS
    term, rate = math.exp(-lam), 0.0
    for i in range(int(lam * 4) + 64):
        rate += term * (1.0 - (1.0 - p) ** i) ** hashes
        term *= lam / (i + 1)
    return rate


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


class BlockedBloom:
    """A blocked Bloom filter (format 2): `blocks` 512-bit integers, `hashes` bits set per key."""

    __slots__ = ("blocks", "hashes", "masks")

    def __init__(self, blocks: list[int], hashes: int = DEFAULT_HASHES) -> None:
        if not blocks or not 1 <= hashes <= 64:
            raise ValueError(
                f"a blocked Bloom filter needs ≥1 block and 1..64 hashes, got {len(blocks)} blocks, "
                f"{hashes} hashes"
            )
        self.blocks, self.hashes = blocks, hashes
        self.masks = masks(hashes)

    @classmethod
    def for_keys(
        cls, n_keys: int, bits_per_key: int = DEFAULT_BITS_PER_KEY, hashes: int = DEFAULT_HASHES
    ) -> BlockedBloom:
        return cls([0] * max(1, -(-n_keys * bits_per_key // BLOCK_BITS)), hashes)

    @property
    def m(self) -> int:
        return BLOCK_BITS * len(self.blocks)

    def add_hashes(self, hashes: Iterable[int]) -> None:
        blocks, n = self.blocks, len(self.blocks)
        high, low = self.masks
        for h in hashes:
            x = (h * _GOLDEN64) & _MASK64
            blocks[h % n] |= high[x >> 52] | low[(x >> 40) & 0xFFF]

    def add(self, key: bytes) -> None:
        self.add_hashes((filter_hash(key),))

    def may_contain(self, key: bytes) -> bool:
        """False means certainly absent; True means probably present (reads.py inlines this)."""
        h = filter_hash(key)
        mask = key_mask(h, self.masks)
        return self.blocks[h % len(self.blocks)] & mask == mask

    def to_bytes(self) -> bytes:
        bitmap = b"".join(b.to_bytes(_BLOCK_BYTES, "little") for b in self.blocks)
        return _HEADER.pack(BLOCKED_VERSION, self.hashes, self.m) + bitmap


def read_filter(data: bytes) -> BloomFilter | BlockedBloom:
    """Parse a serialized filter of either format; ValueError if it is not one (the caller
    names the file)."""
    if len(data) >= _HEADER.size and data[0] == BLOCKED_VERSION:
        _, hashes, m = _HEADER.unpack_from(data)
        size = len(data) - _HEADER.size
        if m != 8 * size or size % _BLOCK_BYTES:
            raise ValueError(f"bitmap of {size} bytes does not fit {m} bits in 512-bit blocks")
        fb = int.from_bytes
        return BlockedBloom(
            [fb(data[i : i + _BLOCK_BYTES], "little") for i in range(_HEADER.size, len(data), _BLOCK_BYTES)],
            hashes,
        )
    return BloomFilter.from_bytes(data)


def measure_false_positive_rate(
    bits_per_key: int = DEFAULT_BITS_PER_KEY,
    hashes: int = DEFAULT_HASHES,
    keys: int = 100_000,
    seed: int = 0,
    probes: int | None = None,
    *,
    blocked: bool = False,
) -> dict[str, float | int]:
    """Insert `keys` random keys, probe with as many absent keys (or `probes`), count false hits;
    in the classic filter (format 1), or with `blocked` the one tables are written with now.

    Rates are fractions (0.0082, not 0.82). Keys are random 16-byte strings from
    `random.Random(seed)`, so a run is reproducible.
    """
    if keys < 1 or bits_per_key < 1:
        raise ValueError("keys and bits_per_key must be positive")
    rng = Random(seed)
    bloom: BloomFilter | BlockedBloom
    if blocked:
        bloom = BlockedBloom.for_keys(keys, bits_per_key, hashes)
        theoretical = blocked_fp_rate(bits_per_key, hashes)
    else:
        bloom = BloomFilter(keys * bits_per_key, hashes)
        theoretical = theoretical_fp_rate(bits_per_key, hashes)
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
    return {
        "bits_per_key": bits_per_key,
        "hashes": hashes,
        "keys": len(present),
        "probes": tested,
        "false_positives": false_positives,
        "measured": measured,
        "theoretical": theoretical,
        "relative_error": (measured - theoretical) / theoretical,
        "bytes": bloom.m // 8,
    }
