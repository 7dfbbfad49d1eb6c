"""SSTable data blocks: their columnar encoding, their check, the digests that let a checked
block's later reads check only the bytes they use (`block_digests`), and the cache of checked
blocks.

A data block is `payload | crc32(payload) u32`, the payload columnar so CPython reads it with one
`struct` call: `n u32 | kinds n×u8 | offsets (2n+1)×u32 | keys | values`, where key j is
payload[off[j]:off[j+1]] and value j is payload[off[n+j]:off[n+j+1]]. The last offset is the
payload's length, so a block also says how long it is: a table whose index is damaged can be
walked block by block from its start (`walk_blocks`).
"""

from __future__ import annotations

import itertools
import struct
import sys
import zlib
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bhandar_cli.storage.record_kinds import DELETE, KIND_NAMES

DEFAULT_BLOCK_BYTES = 4096
_U32 = struct.Struct("<I")
_KINDS = bytes(KIND_NAMES)  # translate(None, _KINDS) leaves only invalid kind bytes
CRC_RESIDUE = zlib.crc32(_U32.pack(zlib.crc32(b"")))
PAIR = struct.Struct("<II")
ENTRY_COST = 120  # what a cached block costs beyond its bytes: its object, dict slot, key


def _u32s(data: bytes, at: int, count: int) -> Sequence[int]:
    """`count` little-endian u32 at `at`, read in place."""
    view = memoryview(data)[at : at + 4 * count]
    if _LITTLE_ENDIAN:
        return view.cast("I")
    swapped = array("I", view)
    swapped.byteswap()
    return swapped


_LITTLE_ENDIAN = sys.byteorder == "little" and array("I").itemsize == 4


class CachedBlock:
    """A checked data block as the cache keeps it: its bytes and record count. A get searches
    it in place (as `find_in_block` does); decoding it when it entered the cache (slicing out
    its keys, for a bisect) measured slower at 1M keys: more was spent slicing blocks that were
    evicted before their next read than was saved on the reads."""

    __slots__ = ("n", "raw", "ref")

    def __init__(self, raw: bytes, n: int) -> None:
        self.raw, self.n = raw, n
        self.ref = False  # read again since it entered the cache (CLOCK's reference bit)

    @property
    def cost(self) -> int:
        """The memory it holds, as the cache counts it."""
        return len(self.raw) + ENTRY_COST


class Block:
    """A checked data block, decoded (for scans, compactions and walks): its keys sliced out."""

    __slots__ = ("keys", "kinds", "n", "offs", "raw")

    def __init__(self, raw: bytes, n: int) -> None:
        self.raw, self.n = raw, n
        self.kinds = raw[4 : 4 + n]
        self.offs = offs = _u32s(raw, 4 + n, 2 * n + 1)
        self.keys = [raw[a:b] for a, b in itertools.pairwise(offs[: n + 1])]

    def find(self, key: bytes) -> int | None:
        """The index of `key` in this block, or None."""
        keys = self.keys
        j = bisect_left(keys, key)
        return j if j < self.n and keys[j] == key else None

    def value(self, j: int) -> bytes | None:
        if self.kinds[j] == DELETE:
            return None
        offs = self.offs
        return self.raw[offs[self.n + j] : offs[self.n + j + 1]]


def find_in_block(data: bytes, n: int, key: bytes) -> tuple[int, bytes | None] | None:
    """(kind, value) of `key` in a checked block (`check_block`) of `n` records, or None."""
    j = find_index(data, n, key)
    if j < 0:
        return None
    if data[4 + j] == DELETE:
        return DELETE, None
    a, b = PAIR.unpack_from(data, 4 + n + 4 * (n + j))
    return data[4 + j], data[a:b]


def find_index(data: bytes, n: int, key: bytes) -> int:
    """The index of `key` among the `n` records of a block, or -1: read from its bytes with a few
    C calls, no per-record work. The key is looked for as a substring of the block's keys, which
    lie end to end; a match is one of them if some key j starts and ends there, that is if the
    offsets (start, end) follow each other in the offsets array, 4-aligned. A match across two
    keys, or inside one, is skipped. It reads only the block's head: its count, kinds, offsets and
    keys."""
    first, at = 8 + 9 * n, 4 + n  # where the keys and the offsets start
    keys_end = _U32.unpack_from(data, at + 4 * n)[0]
    p = data.find(key, first, keys_end)
    size = len(key)
    while p >= 0:
        bounds = PAIR.pack(p, p + size)
        i = data.find(bounds, at, at + 4 * n + 4)
        while i >= 0 and (i - at) & 3:
            i = data.find(bounds, i + 1, at + 4 * n + 4)
        if i >= 0:
            return (i - at) >> 2
        p = data.find(key, p + 1, keys_end)
    return -1


def block_digests(data: bytes, n: int) -> array[int]:
    """What a checked block's reads can be checked against later without its whole CRC:
    `[head_end, crc32 of the head, crc32 of value 0, ..., of value n-1]`. A get uses the head
    (to find the key and its value's offsets) and one value; checking those bytes against these
    digests checks everything the answer depends on (see `Table.get`)."""
    offs = _u32s(data, 4 + n, 2 * n + 1)
    end = offs[n]
    digests = array("I", (end, zlib.crc32(data[:end])))
    digests.extend(map(zlib.crc32, map(data.__getitem__, map(slice, offs[n:-1], offs[n + 1 :]))))
    return digests


def encode_block(keys: list[bytes], kinds: list[int], values: list[bytes]) -> bytes:
    n = len(keys)
    lengths = itertools.chain(map(len, keys), map(len, values))
    offsets = itertools.accumulate(lengths, initial=4 + 9 * n + 4)
    payload = b"".join([_U32.pack(n), bytes(kinds), struct.pack(f"<{2 * n + 1}I", *offsets), *keys, *values])
    return payload + _U32.pack(zlib.crc32(payload))


def check_block(data: bytes) -> int:
    """Check a block; its record count. Raises ValueError saying which check failed."""
    # CRC-32 of a message followed by its own CRC (little-endian) is this constant whatever the
    # message, and only then: the check needs no copy of the payload without its CRC.
    if zlib.crc32(data) != CRC_RESIDUE:
        raise ValueError("checksum mismatch")
    end = len(data) - 4  # the payload's length
    n: int = _U32.unpack_from(data)[0] if end >= 4 else 0
    if n == 0 or 4 + 9 * n + 4 > end:
        raise ValueError("malformed (its record count does not fit it)")
    # The CRC already passed, so these catch writer bugs, not disk damage.
    first, last = PAIR.unpack_from(data, 4 + n)[0], _U32.unpack_from(data, 4 + n + 8 * n)[0]
    if first != 8 + 9 * n or last != end or data[4 : 4 + n].translate(None, _KINDS):
        raise ValueError("malformed (record offsets or kinds do not add up)")
    return n


def parse_block(data: bytes) -> Block:
    """Check a block and decode it; raises ValueError saying which check failed."""
    return Block(data, check_block(data))


@dataclass
class WalkedBlocks:
    offsets: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    last_keys: list[bytes] = field(default_factory=list)
    records: int = 0
    bad_at: int | None = None  # where the walk met something that is neither a block nor the index


def walk_blocks(pread: Callable[[int, int], bytes], end: int, *, until_index: bool) -> WalkedBlocks:
    """The data blocks of a table, found by reading them one after the other from offset 0 to
    `end` (each block's record count and last offset say how long it is). With `until_index`
    (`end` is not known to be where the blocks end), the walk ends without damage at an index
    block that lists exactly the blocks walked."""
    found = WalkedBlocks()
    pos = 0
    while pos < end:
        count = pread(pos, 4)
        n = _U32.unpack(count)[0] if len(count) == 4 else 0
        head = pread(pos, min(8 + 9 * n, end - pos))
        length = _U32.unpack_from(head, len(head) - 4)[0] + 4 if len(head) == 8 + 9 * n else 0
        try:
            if not 12 + 9 * n <= length <= end - pos:
                raise ValueError("no block length")
            block = parse_block(pread(pos, length))
        except (ValueError, struct.error):
            k = len(found.offsets)
            index_head = _U32.pack(k) + struct.pack(f"<{k}Q", *found.offsets)
            if not (until_index and pread(pos, len(index_head)) == index_head):
                found.bad_at = pos
            return found
        found.offsets.append(pos)
        found.lengths.append(length)
        found.last_keys.append(block.keys[-1])
        found.records += block.n
        pos += length
    return found


def cache_key(uid: int, block: int) -> int:
    """A block's key in the cache: its table's uid and its number, in one int (no tuple per get)."""
    return uid << 32 | block


class BlockCache:
    """Checked blocks shared by every table of an engine, bounded by the bytes they hold
    (`Block.cost`), keyed by `cache_key`.

    Eviction is CLOCK (second chance) rather than strict LRU: a hit only sets a flag instead of
    reordering, which is measurably cheaper per `get` in CPython, with LRU-like hit rates.
    Once full, a block is admitted only on its second miss (TinyLFU's "doorkeeper"): when the
    data is much larger than the cache, blocks read once would only churn it, and measured
    slower than no cache at all. A block not admitted is read without being decoded
    (`find_in_block`).
    """

    def __init__(self, capacity_bytes: int = 16 << 20) -> None:
        self.capacity = capacity_bytes
        self.used = 0
        self.hits = self.misses = 0
        self.blocks: OrderedDict[int, CachedBlock] = OrderedDict()  # Table.get reads it directly
        self._seen: set[int] = set()  # missed once while the cache was full
        self._seen_limit = max(64, capacity_bytes // DEFAULT_BLOCK_BYTES)

    def get(self, key: int) -> CachedBlock | None:
        block = self.blocks.get(key)
        if block is None:
            self.misses += 1
        else:
            self.hits += 1
            block.ref = True
        return block

    def drop_table(self, uid: int, blocks: int) -> None:
        """Forget a table's blocks: it left the tree (compacted away, quarantined). Its keys are
        unique to it, so none could be served for another table; this returns their memory now
        rather than when the clock would come round to them."""
        cached = self.blocks
        for i in range(blocks):
            block = cached.pop(cache_key(uid, i), None)
            if block is not None:
                self.used -= block.cost

    def admits(self, key: int, cost: int) -> bool:
        """Whether a block just missed should be decoded and `store`d (the doorkeeper's say)."""
        if self.capacity <= 0:
            return False
        if self.used + cost > self.capacity:
            seen = self._seen
            if key not in seen:
                if len(seen) >= self._seen_limit:
                    seen.clear()
                seen.add(key)
                return False
            seen.discard(key)
        return True

    def put(self, key: int, block: CachedBlock) -> None:
        if self.admits(key, block.cost):
            self.store(key, block)

    def store(self, key: int, block: CachedBlock) -> None:
        blocks = self.blocks
        blocks[key] = block
        self.used += block.cost
        while self.used > self.capacity and blocks:
            old_key, old = blocks.popitem(last=False)
            if old.ref:  # used since it came in: a second chance at the back
                old.ref = False
                blocks[old_key] = old
            else:
                self.used -= old.cost
