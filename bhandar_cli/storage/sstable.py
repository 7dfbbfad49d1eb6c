"""SSTables: immutable sorted files of records, with a block index, a Bloom filter and checksums.

File layout (all integers little-endian):

    data block 0 | data block 1 | ... | index block | Bloom block | footer (64 bytes)

- data block: see blocks.py (columnar records and their CRC). Blocks close once they pass
  `block_bytes` (default 4 KiB).
- index block: `n u32 | offsets n×u64 | lengths n×u32 | last-key lengths n×u32 | last keys`;
  the block holding key k is the first whose last key is ≥ k.
- Bloom block: the filter of every key in the table (bloom.py: blocked, format 2; tables written
  before have a classic one, format 1, which is still read).
- footer: `magic 8s | version u32 | index offset u64, length u32, crc32 u32 | Bloom offset u64,
  length u32, crc32 u32 | records u64 | blocks u32 | pad | crc32 of the footer so far u32`.

Every byte is covered by a CRC, and damage costs only what it must (each case is a `Corruption`
in the engine's `DamageLog`, naming the file, the offset and the keys lost):
- a bad data block loses its own records: reads of its keys fall through to older tables, scans
  and compactions skip it. Its keys are known from the index: after the previous block's last
  key, through its own.
- a bad index block is rebuilt by walking the data blocks (each block says how long it is); a
  bad Bloom filter is replaced by one that passes every key; a bad footer is rebuilt by walking
  the blocks until the index. No record is lost to any of these.
- a table whose first block cannot be found (a torn or truncated file) raises
  `CorruptTableError` naming the file and the check: the engine quarantines it whole.
Format 3 (an encrypting engine's): the same layout, each data block, the index block and the
Bloom block sealed (cipher.py: AES-GCM bound to the file id in the footer's last 8 bytes and to
the unit's offset; offsets, lengths and CRCs are the sealed units'). A unit that fails its tag is
damage as above; the footer stays plain, and a table whose index cannot be opened is quarantined
(sealed blocks cannot be walked). Format 2 tables (plain) are still read.
Opening with `verify=True` checks every block up front. A block's CRC is checked whole once per
open table (at open, or at its first read): a plain table then keeps the block's digests (its
head's CRC and each value's, blocks.py `block_digests`, some 230 bytes a 4 KiB block), and a later read
of the block from the file checks only what its answer depends on against them. A byte changed
after the check is found by the first read that depends on it, by the next open and by a
compaction (which reads blocks whole), and costs the block's records as above; no answer is made
from it. Sealed blocks (format 3) are authenticated whole at every read: AES-GCM has no cheaper
partial check.
"""

from __future__ import annotations

import itertools
import struct
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from zlib import crc32

from bhandar_cli.storage import damage
from bhandar_cli.storage.blocks import (
    DEFAULT_BLOCK_BYTES,
    ENTRY_COST,
    PAIR,
    Block,
    BlockCache,
    CachedBlock,
    block_digests,
    cache_key,
    check_block,
    find_in_block,
    find_index,
    walk_blocks,
)
from bhandar_cli.storage.bloom import (
    BlockedBloom,
    BloomFilter,
    MaskTables,
    read_filter,
)
from bhandar_cli.storage.cipher import TABLE_BLOCK, TABLE_BLOOM, TABLE_INDEX, DataCipher, FileSeal
from bhandar_cli.storage.damage import Corruption, DamageLog, KeyInterval
from bhandar_cli.storage.disk import Disk, ReadFile
from bhandar_cli.storage.record_kinds import DELETE
from bhandar_cli.storage.storage_errors import CorruptTableError
from bhandar_cli.storage.table_writer import (
    _FOOTER,
    _U32,
    ENCRYPTED_VERSION,
    FOOTER_SIZE,
    FORMAT_VERSION,
    MAGIC,
    TableInfo,
    TableWriter,
)

__all__ = ["DEFAULT_BLOCK_BYTES", "FOOTER_SIZE", "BlockCache", "Table", "TableInfo", "TableWriter"]

_uids = itertools.count(1)  # cache keys: unique per opened table, even across engines
DamageSink = Callable[[Corruption], None]


class _EveryKey:
    """The Bloom filter of a table whose own filter is damaged: every key may be there."""

    def may_contain_hash(self, h: int) -> bool:
        return True

    def may_contain(self, key: bytes) -> bool:
        return True


class Table:
    """An open, checked SSTable (see the module docstring for what damage costs).

    Nothing in a table changes after it is opened but the set of blocks found bad, which only
    grows, and the blocks' digests (`get`), taken once. `get` and cached `entries` use the
    engine's block cache and report damage to the engine's `DamageLog` (owner thread only);
    `entries(cached=False, on_damage=...)` reads only the file, checks every block whole and
    reports to its caller, so a compaction's worker thread may run it while the owner reads the
    same table.
    """

    def __init__(
        self,
        disk: Disk,
        path: str,
        cache: BlockCache | None = None,
        *,
        verify: bool = True,
        damage_log: DamageLog | None = None,
        cipher: DataCipher | None = None,
    ) -> None:
        self.path, self._cipher, self._seal = path, cipher, FileSeal(None)
        self.uid = next(_uids)
        self._cache_base = cache_key(self.uid, 0)
        # The blocked filter's (blocks, how many, masks), read inline by reads.lookup; None when
        # the table has a classic filter (format 1) or none (damaged): then `bloom` says.
        self.filter: tuple[list[int], int, MaskTables] | None = None
        self._cache = cache if cache is not None else BlockCache(0)
        self._log = damage_log if damage_log is not None else DamageLog()
        self._bad: set[int] = set()  # data blocks that failed their check
        self.damaged = False  # a check failed: the engine rewrites the table without the damage
        self._file: ReadFile = disk.open_read(path)
        self._pread = self._file.pread
        try:
            self._load()
            # Per data block, the digests of its bytes once they were checked whole, or None
            # (`block_digests`): what makes a block's CRC a once-per-open-table check.
            self._digests: list[array[int] | None] = [None] * self.blocks
            self._plain = self._seal.cipher is None
            self.encrypted = not self._plain  # its blocks are sealed (format 3)
            if verify:
                self.verify()
        except BaseException:
            self._file.close()
            raise

    def _fail(self, what: str) -> CorruptTableError:
        return CorruptTableError(self.path, what)

    def _read(self, offset: int, length: int, what: str) -> bytes:
        data = self._file.pread(offset, length)
        if len(data) != length:
            raise self._fail(f"{what} at offset {offset} is cut short ({len(data)} of {length} bytes)")
        return data

    def _damaged(self, kind: str, offset: int, length: int, what: str, lost: KeyInterval | None) -> None:
        self.damaged = True
        self._log.add(Corruption(kind, self.path, offset, length, what, lost))

    def report_to(self, log: DamageLog) -> None:
        """Report damage to `log` from now on (the engine's, once a job's output is installed)."""
        for c in self._log.take():
            log.add(c)
        self._log = log

    def _load(self) -> None:
        self.size = size = self._file.size
        if size < FOOTER_SIZE:
            raise self._fail(f"{size} bytes is too short for a footer (a torn or truncated table)")
        footer = self._read(size - FOOTER_SIZE, FOOTER_SIZE, "footer")
        fields = _FOOTER.unpack(footer)
        if fields[0] != MAGIC or zlib.crc32(footer[:-4]) != fields[-1]:
            what = "footer checksum mismatch" if fields[0] == MAGIC else f"bad magic number {fields[0]!r}"
            self._walk(size - FOOTER_SIZE, None)
            self._damaged(damage.SSTABLE_FOOTER, size - FOOTER_SIZE, FOOTER_SIZE, what, None)
            return
        _, version, index_off, index_len, index_crc, bloom_off, bloom_len, bloom_crc, records, n = fields[:10]
        if version not in (FORMAT_VERSION, ENCRYPTED_VERSION):
            raise self._fail(f"format version {version}, this build reads 2 and 3")
        self._seal = FileSeal.of_file(self._cipher, version == ENCRYPTED_VERSION, fields[10], self.path)
        if bloom_off != index_off + index_len or bloom_off + bloom_len != size - FOOTER_SIZE:
            raise self._fail("footer offsets do not tile the file")
        index = self._read(index_off, index_len, "index block")
        try:
            if zlib.crc32(index) != index_crc:
                raise ValueError("checksum mismatch")
            self._parse_index(self._seal.open(index, TABLE_INDEX, index_off), n)
            self.records = records
        except (ValueError, struct.error) as e:
            self._walk(index_off, index_off)
            self._damaged(damage.SSTABLE_INDEX, index_off, index_len, f"index block {e}", None)
        bloom = self._read(bloom_off, bloom_len, "Bloom filter")
        try:
            if zlib.crc32(bloom) != bloom_crc:
                raise ValueError("checksum mismatch")
            bloom = self._seal.open(bloom, TABLE_BLOOM, bloom_off)
            self.bloom: BloomFilter | BlockedBloom | _EveryKey = read_filter(bloom)
            if isinstance(self.bloom, BlockedBloom):
                self.filter = (self.bloom.blocks, len(self.bloom.blocks), self.bloom.masks)
        except (ValueError, struct.error) as e:
            self.bloom = _EveryKey()
            self._damaged(damage.SSTABLE_BLOOM, bloom_off, bloom_len, f"Bloom filter {e}", None)

    def _parse_index(self, index: bytes, n: int) -> None:
        (count,) = _U32.unpack_from(index)
        if count != n:
            raise ValueError(f"lists {count} blocks, footer says {n}")
        offsets = struct.unpack_from(f"<{n}Q", index, 4)
        lengths = struct.unpack_from(f"<{n}I", index, 4 + 8 * n)
        klens = struct.unpack_from(f"<{n}I", index, 4 + 12 * n)
        offs = list(itertools.accumulate(klens, initial=4 + 16 * n))
        if offs[-1] != len(index):
            raise ValueError("last keys do not fill the index block")
        pos = 0
        for off, ln in zip(offsets, lengths, strict=True):
            if off != pos or ln < 8:
                raise ValueError("block offsets are not contiguous")
            pos += ln
        # Arrays, not lists of ints: a get reads one of each, and ints boxed one by one were
        # scattered over the heap (a cache miss each).
        self._offsets, self._lengths = array("Q", offsets), array("I", lengths)
        self._last_keys = [index[a:b] for a, b in itertools.pairwise(offs)]
        self.blocks = n

    def _walk(self, end: int, index_off: int | None) -> None:
        """Find the data blocks by reading them from the start, when the index or the footer that
        lists them is damaged (see `blocks.walk_blocks`)."""
        found = walk_blocks(
            self._file.pread, end if index_off is None else index_off, until_index=index_off is None
        )
        if found.bad_at is not None:
            after = found.last_keys[-1] if found.last_keys else None
            what = "unreadable while walking the blocks (the rest of the table is lost)"
            self._damaged(damage.SSTABLE_BLOCK, found.bad_at, end - found.bad_at, what, KeyInterval(after))
        if not found.offsets:
            raise self._fail("no data block can be found (a torn or truncated table)")
        self._offsets, self._lengths = array("Q", found.offsets), array("I", found.lengths)
        self._last_keys = found.last_keys
        self.blocks, self.records = len(found.offsets), found.records
        self.bloom = _EveryKey()

    def block_index(self) -> list[tuple[int, int, bytes]]:
        """(offset, length, last key) of every data block: block i holds the keys after block
        i-1's last key through its own."""
        return list(zip(self._offsets, self._lengths, self._last_keys, strict=True))

    def verify(self) -> None:
        """Check every block's CRC and structure (reads the whole table once), and keep the
        digests of the good ones (plain tables: see `get`)."""
        for i in range(self.blocks):
            checked = self._checked(i)
            if checked is not None and self._plain:
                self._digests[i] = block_digests(*checked)

    def _lost(self, i: int) -> KeyInterval:
        return KeyInterval(self._last_keys[i - 1] if i else None, self._last_keys[i])

    def _checked(self, i: int, on_damage: DamageSink | None = None) -> tuple[bytes, int] | None:
        """Block i's (plain) bytes and record count, checked; None if it is bad (reported to
        `on_damage`, or the engine's log)."""
        if on_damage is None and i in self._bad:
            return None
        off, length = self._offsets[i], self._lengths[i]
        try:
            data = self._seal.open(self._read(off, length, f"block {i}"), TABLE_BLOCK, off)
            return data, check_block(data)
        except ValueError as e:
            c = Corruption(damage.SSTABLE_BLOCK, self.path, off, length, f"block {i} {e}", self._lost(i))
        if on_damage is not None:
            on_damage(c)
        else:
            self._bad.add(i)
            self._digests[i] = None
            self.damaged = True
            self._log.add(c)
        return None

    def _read_block(self, i: int, on_damage: DamageSink | None = None) -> Block | None:
        """Block i, checked and decoded; None if it is bad (see `_checked`)."""
        checked = self._checked(i, on_damage)
        return None if checked is None else Block(*checked)

    def may_contain_hash(self, h: int) -> bool:
        """The classic filter's answer for a `bloom_hash` (tables of format 1)."""
        return self.bloom.may_contain_hash(h) if not isinstance(self.bloom, BlockedBloom) else True

    def may_contain(self, key: bytes) -> bool:
        return self.bloom.may_contain(key)

    def get(self, key: bytes) -> tuple[int, bytes | None] | None:
        """The record for `key` in this table, or None (no Bloom check: the caller does it).

        A cached block was checked whole when it was read. A block read from the file is
        checked whole (`_get_checked`) unless the table holds its digests (`block_digests`,
        taken when it was first checked whole): then only the bytes the answer depends on are
        checked against them, the block's head (count, kinds, offsets, keys) and the one value;
        a mismatch takes the careful path, which checks the whole block again and reports
        damage. Either way the key is looked for in the block's bytes (`find_index`), inlined
        here with the cache lookup, as `BlockCache.get` is: a get's calls were a sixth of its
        time."""
        i = bisect_left(self._last_keys, key)
        if i == self.blocks:
            return None
        ck = self._cache_base + i
        cache = self._cache
        cached = cache.blocks.get(ck)
        if cached is not None:
            cache.hits += 1
            cached.ref = True
            data, n, digests = cached.raw, cached.n, None
        else:
            cache.misses += 1
            digests = self._digests[i]
            if digests is None:
                return self._get_checked(i, key)
            length = self._lengths[i]
            data = self._pread(self._offsets[i], length)
            if len(data) != length or crc32(data[: digests[0]]) != digests[1]:
                return self._get_checked(i, key)
            n = len(digests) - 2
        j = find_index(data, n, key)
        if j < 0:
            return None
        kind = data[4 + j]
        if kind == DELETE:
            return DELETE, None
        a, b = PAIR.unpack_from(data, 4 + n + 4 * (n + j))
        value = data[a:b]
        if digests is not None:
            if crc32(value) != digests[2 + j]:
                return self._get_checked(i, key)
            if cache.admits(ck, length + ENTRY_COST):
                checked = self._checked(i)  # a cached block is never checked again: check it whole
                if checked is not None:
                    cache.store(ck, CachedBlock(*checked))
        return kind, value

    def _get_checked(self, i: int, key: bytes) -> tuple[int, bytes | None] | None:
        """`get` from block i read from the file and checked whole (reporting damage): kept in
        the cache if it admits the block, else its digests are kept for the next read."""
        checked = self._checked(i)
        if checked is None:
            return None
        data, n = checked
        ck = self._cache_base + i
        if self._cache.admits(ck, len(data) + ENTRY_COST):
            self._cache.store(ck, CachedBlock(data, n))
        elif self._plain:
            self._digests[i] = block_digests(data, n)
        return find_in_block(data, n, key)

    def entries(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        *,
        cached: bool = True,
        on_damage: DamageSink | None = None,
    ) -> Iterator[tuple[bytes, int, bytes | None]]:
        """(key, kind, value) for start ≤ key < end, in key order, one block in memory at a time;
        bad blocks are skipped (and reported).

        Scans use blocks already cached but do not fill the cache; `cached=False` does not even
        look there (a compaction's worker thread: the cache belongs to the engine's owner thread),
        and needs `on_damage`, as the engine's log is the owner's too.
        """
        i = 0 if start is None else bisect_left(self._last_keys, start)
        cache = self._cache if cached else None
        for b in range(i, self.blocks):
            hit = cache.get(self._cache_base + b) if cache is not None else None
            blk = Block(hit.raw, hit.n) if hit is not None else self._read_block(b, on_damage)
            if blk is None:
                continue
            keys, kinds, value = blk.keys, blk.kinds, blk.value
            first = 0 if start is None or b != i else bisect_left(keys, start)
            for j in range(first, len(keys)):
                key = keys[j]
                if end is not None and key >= end:
                    return
                yield key, kinds[j], value(j)

    def uncache(self) -> None:
        """Owner thread: drop this table's blocks from the shared cache (it left the tree)."""
        self._cache.drop_table(self.uid, self.blocks)

    def close(self) -> None:
        self._file.close()
