"""SSTable data blocks: their columnar encoding, their check, and the cache of checked blocks.

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

from bhandar_cli.storage.records import DELETE, KIND_NAMES

DEFAULT_BLOCK_BYTES = 4096
_U32 = struct.Struct("<I")
_KINDS = bytes(KIND_NAMES)  # translate(None, _KINDS) leaves only invalid kind bytes
_HOT_USES = 8  # reads of a cached block after which its keys are sliced out once
_CRC_RESIDUE = zlib.crc32(_U32.pack(zlib.crc32(b"")))


def _u32s(data: bytes, at: int, count: int) -> Sequence[int]:
    """`count` little-endian u32 at `at`, read in place: a block's offsets, of which a read
    looks at a handful (unpacking them all into a tuple cost more than the block's CRC)."""
    view = memoryview(data)[at : at + 4 * count]
    if _LITTLE_ENDIAN:
        return view.cast("I")
    swapped = array("I", view)
    swapped.byteswap()
    return swapped


_LITTLE_ENDIAN = sys.byteorder == "little" and array("I").itemsize == 4


class Block:
    """A checked data block: its bytes (with the CRC) and where each record's key and value lie."""

    __slots__ = ("keys", "kinds", "n", "offs", "raw", "ref", "uses")

    def __init__(self, raw: bytes, kinds: bytes, offs: Sequence[int], n: int) -> None:
        self.raw, self.kinds, self.offs, self.n = raw, kinds, offs, n
        self.ref = False  # read again since it entered the cache (CLOCK's reference bit)
        self.keys: list[bytes] | None = None  # sliced once the block proves hot (Table.get)
        self.uses = 0

    def slice_keys(self) -> list[bytes]:
        raw, offs = self.raw, self.offs
        self.keys = [raw[a:b] for a, b in itertools.pairwise(offs[: self.n + 1])]
        return self.keys

    def find(self, key: bytes) -> int | None:
        """The index of `key` in this block, or None."""
        keys = self.keys
        if keys is None:
            self.uses += 1
            if self.uses == 2:  # read again (cached): its offsets as a tuple index 3× faster
                self.offs = tuple(self.offs)
            # Slicing every key costs about five searches over the raw bytes, and most blocks
            # leave the cache before they are read that often: slice only blocks that proved hot.
            if self.uses < _HOT_USES:
                raw, offs = self.raw, self.offs
                lo, hi = 0, self.n
                while lo < hi:  # bisect_left, inline: a key function per probe cost twice this
                    mid = (lo + hi) >> 1
                    if raw[offs[mid] : offs[mid + 1]] < key:
                        lo = mid + 1
                    else:
                        hi = mid
                return lo if lo < self.n and raw[offs[lo] : offs[lo + 1]] == key else None
            keys = self.slice_keys()
        j = bisect_left(keys, key)
        return j if j < len(keys) and keys[j] == key else None

    def value(self, j: int) -> bytes | None:
        if self.kinds[j] == DELETE:
            return None
        offs = self.offs
        return self.raw[offs[self.n + j] : offs[self.n + j + 1]]


def encode_block(keys: list[bytes], kinds: list[int], values: list[bytes]) -> bytes:
    n = len(keys)
    lengths = itertools.chain(map(len, keys), map(len, values))
    offsets = itertools.accumulate(lengths, initial=4 + 9 * n + 4)
    payload = b"".join([_U32.pack(n), bytes(kinds), struct.pack(f"<{2 * n + 1}I", *offsets), *keys, *values])
    return payload + _U32.pack(zlib.crc32(payload))


def parse_block(data: bytes) -> Block:
    """Check a block and find its record offsets (key slices are made on a later read); raises
    ValueError saying which check failed."""
    # CRC-32 of a message followed by its own CRC (little-endian) is this constant whatever the
    # message, and only then: the check needs no copy of the payload without its CRC.
    if zlib.crc32(data) != _CRC_RESIDUE:
        raise ValueError("checksum mismatch")
    end = len(data) - 4  # the payload's length
    n = _U32.unpack_from(data)[0] if end >= 4 else 0
    if n == 0 or 4 + 9 * n + 4 > end:
        raise ValueError("malformed (its record count does not fit it)")
    offs = _u32s(data, 4 + n, 2 * n + 1)
    kinds = data[4 : 4 + n]
    # The CRC already passed, so these catch writer bugs, not disk damage.
    if offs[0] != 8 + 9 * n or offs[-1] != end or kinds.translate(None, _KINDS):
        raise ValueError("malformed (record offsets or kinds do not add up)")
    return Block(data, kinds, offs, n)


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
        found.last_keys.append(block.slice_keys()[-1])
        found.records += block.n
        pos += length
    return found


class BlockCache:
    """Checked blocks shared by every table of an engine, bounded by raw block bytes.

    Eviction is CLOCK (second chance) rather than strict LRU: a hit only sets a flag instead of
    reordering, which is measurably cheaper per `get` in CPython, with LRU-like hit rates.
    Once full, a block is admitted only on its second miss (TinyLFU's "doorkeeper"): when the
    data is much larger than the cache, blocks read once would only churn it, and measured
    slower than no cache at all.
    """

    def __init__(self, capacity_bytes: int = 16 << 20) -> None:
        self.capacity = capacity_bytes
        self.used = 0
        self.hits = self.misses = 0
        self._blocks: OrderedDict[tuple[int, int], Block] = OrderedDict()
        self._seen: set[tuple[int, int]] = set()  # missed once while the cache was full
        self._seen_limit = max(64, capacity_bytes // DEFAULT_BLOCK_BYTES)

    def get(self, key: tuple[int, int]) -> Block | None:
        block = self._blocks.get(key)
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
        cached = self._blocks
        for i in range(blocks):
            block = cached.pop((uid, i), None)
            if block is not None:
                self.used -= len(block.raw)

    def put(self, key: tuple[int, int], block: Block) -> None:
        if self.capacity <= 0:
            return
        if self.used + len(block.raw) > self.capacity:
            seen = self._seen
            if key not in seen:
                if len(seen) >= self._seen_limit:
                    seen.clear()
                seen.add(key)
                return
            seen.discard(key)
        blocks = self._blocks
        blocks[key] = block
        self.used += len(block.raw)
        while self.used > self.capacity and blocks:
            old_key, old = blocks.popitem(last=False)
            if old.ref:  # used since it came in: a second chance at the back
                old.ref = False
                blocks[old_key] = old
            else:
                self.used -= len(old.raw)
