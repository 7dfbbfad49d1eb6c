"""One keyspace's hash index on one replica: every key's digest by token bucket, kept up to date
on every write, from which any Merkle node of any range is read without a scan.

The 32-bit token space is cut into 2**BUCKET_BITS fixed buckets. Each bucket keeps its keys'
digests (key → digest) and the XOR of their entry hashes (`merkle.entry_hash`); a Fenwick tree
over the buckets' XORs gives the XOR of any run of whole buckets in O(log B). So the hash of an
arc is O(log B) plus the entries of its two edge buckets (whose tokens are recomputed from their
keys: storing tokens would cost more memory than hashing a few dozen keys). That is exactly the
hash `merkle.MerkleTree` gives the same arc, since a node's hash is the XOR of its entries.

Cost per key (measured with tracemalloc): one dict entry in its bucket (~47 bytes with the table's
slack) and a 12-byte digest object (48 bytes), plus the key string when the store does not share
it: about 100 bytes, so 1M keys take ~100 MB plus their keys. Per keyspace: the two 2**14-slot
lists (256 KB) and, once every bucket holds keys, their 128-bit sums (~1.5 MB).
Tombstones are also listed (key → digest) so a repair session can say which it saw.

A write's digest is worked out when the index is next read, not when the write is stored
(`stage`): a key written several times between two reads (anti-entropy reads every couple of
seconds) is hashed once, and a node that dies first never hashes it. Every read settles the
staged writes first, so no reader sees the difference; at most `STAGED_MAX` wait.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from bhandar_cli.core.membership import key_token
from bhandar_cli.core.repair.merkle import RING_SIZE, Entry, entry_hash

BUCKET_BITS = 14
BUCKETS = 1 << BUCKET_BITS
_SHIFT = 32 - BUCKET_BITS
_BUCKET_SPAN = 1 << _SHIFT
STAGED_MAX = 64  # staged writes whose digests wait for the next read, at most

Describe = Callable[[Any], tuple[bytes, bool]]  # a record -> (its digest, is it a tombstone?)


class TokenHashes:
    """Digests of one keyspace's keys on this replica, by token, with XOR hashes of any arc."""

    def __init__(self, keyspace: str, describe: Describe | None = None) -> None:
        self.keyspace = keyspace
        self._buckets: dict[int, dict[str, bytes]] = {}
        self._folded = [0] * BUCKETS  # each bucket's XOR of entry hashes
        self._fenwick = [0] * (BUCKETS + 1)  # 1-based; node i covers buckets (i - lowbit(i), i]
        self._tombstones: dict[str, bytes] = {}
        self._count = 0
        self._describe = describe  # how a staged record's digest is worked out
        self._staged: dict[str, Any] = {}  # key -> its record, written since the last read

    def __len__(self) -> int:
        if self._staged:
            self._settle()
        return self._count

    # ------------------------------------------------------------------------------- upkeep

    def stage(self, key: str, record: Any) -> None:
        """`key` now has `record`: its digest is worked out (`describe`) when the index is next
        read, or once `STAGED_MAX` writes wait."""
        if self._describe is None:
            raise RuntimeError("an index without `describe` cannot stage records (a caller bug)")
        self._staged[key] = record
        if len(self._staged) >= STAGED_MAX:
            self._settle()

    def _settle(self) -> None:
        staged, self._staged = self._staged, {}
        describe = self._describe
        assert describe is not None  # (only `stage` fills `_staged`)
        for key, record in staged.items():
            self.put(key, *describe(record))

    def put(self, key: str, digest: bytes, tombstone: bool) -> None:
        """`key` now has a record with this digest (a tombstone or not)."""
        if self._staged:
            self._staged.pop(key, None)  # this record replaces the one staged
        b = key_token(self.keyspace, key) >> _SHIFT
        bucket = self._buckets.get(b)
        if bucket is None:
            bucket = self._buckets[b] = {}
        old = bucket.get(key)
        if old == digest:
            return
        change = entry_hash(key, digest)
        if old is None:
            self._count += 1
        else:
            change ^= entry_hash(key, old)
        bucket[key] = digest
        self._fold(b, change)
        if tombstone:
            self._tombstones[key] = digest
        else:
            self._tombstones.pop(key, None)

    def remove(self, key: str) -> None:
        """`key` no longer has a record here."""
        if self._staged:
            self._staged.pop(key, None)
        b = key_token(self.keyspace, key) >> _SHIFT
        bucket = self._buckets.get(b)
        old = None if bucket is None else bucket.pop(key, None)
        if bucket is None or old is None:
            return
        if not bucket:
            del self._buckets[b]
        self._count -= 1
        self._tombstones.pop(key, None)
        self._fold(b, entry_hash(key, old))

    def _fold(self, b: int, change: int) -> None:
        self._folded[b] ^= change
        i = b + 1
        fenwick = self._fenwick
        while i <= BUCKETS:
            fenwick[i] ^= change
            i += i & -i

    # ------------------------------------------------------------------------------- reading

    def arc_hash(self, lo: int, hi: int) -> int:
        """The XOR of the entry hashes of the keys in the arc (lo, hi] (lo == hi: the whole ring)."""
        if self._staged:
            self._settle()
        if lo == hi:
            return self._prefix(BUCKETS)
        first = (lo + 1) % RING_SIZE
        if first <= hi:
            return self._span_hash(first, hi)
        return self._span_hash(first, RING_SIZE - 1) ^ self._span_hash(0, hi)

    def entries(self, lo: int, hi: int) -> Iterator[Entry]:
        """(token, key, digest) of every key in the arc (lo, hi], in no particular order."""
        if self._staged:
            self._settle()
        first = (lo + 1) % RING_SIZE
        if lo == hi:
            yield from self._span_entries(0, RING_SIZE - 1)
        elif first <= hi:
            yield from self._span_entries(first, hi)
        else:
            yield from self._span_entries(first, RING_SIZE - 1)
            yield from self._span_entries(0, hi)

    def tombstones(self, lo: int, hi: int) -> dict[str, bytes]:
        """The tombstones in the arc (lo, hi], key → digest."""
        if self._staged:
            self._settle()
        size = (hi - lo) % RING_SIZE or RING_SIZE
        return {
            key: digest
            for key, digest in self._tombstones.items()
            if (key_token(self.keyspace, key) - lo - 1) % RING_SIZE < size
        }

    def _prefix(self, n: int) -> int:
        """XOR of buckets 0 .. n-1."""
        out = 0
        fenwick = self._fenwick
        while n > 0:
            out ^= fenwick[n]
            n -= n & -n
        return out

    def _span_hash(self, first: int, last: int) -> int:
        """XOR over tokens first..last inclusive (first <= last)."""
        bf, bl = first >> _SHIFT, last >> _SHIFT
        if bf == bl:
            return self._bucket_hash(bf, first, last)
        middle = self._prefix(bl) ^ self._prefix(bf + 1)
        return middle ^ self._bucket_hash(bf, first, last) ^ self._bucket_hash(bl, first, last)

    def _bucket_hash(self, b: int, first: int, last: int) -> int:
        """XOR over bucket b's keys with tokens in first..last."""
        start = b << _SHIFT
        if first <= start and start + _BUCKET_SPAN - 1 <= last:
            return self._folded[b]
        out = 0
        for key, digest in self._buckets.get(b, {}).items():
            if first <= key_token(self.keyspace, key) <= last:
                out ^= entry_hash(key, digest)
        return out

    def _span_entries(self, first: int, last: int) -> Iterator[Entry]:
        keyspace = self.keyspace
        lo, hi = first >> _SHIFT, last >> _SHIFT
        buckets = self._buckets
        if hi - lo >= len(buckets):  # fewer buckets hold keys than the span has: visit only those
            spanned: Iterable[int] = sorted(b for b in buckets if lo <= b <= hi)
        else:
            spanned = range(lo, hi + 1)
        for b in spanned:
            bucket = buckets.get(b)
            if not bucket:
                continue
            for key, digest in bucket.items():
                token = key_token(keyspace, key)
                if first <= token <= last:
                    yield token, key, digest
