"""The block cache (bounded, evicting, never serving a block of a table that left the tree) and
the sparse index (one last key per block: every key found, no absent key found)."""

from __future__ import annotations

import random
from dataclasses import replace

from bhandar_cli.storage.blocks import (
    BlockCache,
    CachedBlock,
    cache_key,
    check_block,
    encode_block,
    find_in_block,
    parse_block,
)
from bhandar_cli.storage.disk.sim_disk import SimDisk
from bhandar_cli.storage.engine import LSMEngine
from bhandar_cli.storage.record_kinds import VALUE
from bhandar_cli.storage.sstable import Table
from bhandar_cli.storage.table_writer import TableWriter

from .conftest import SMALL


def _block(tag: int, size: int = 100) -> CachedBlock:
    data = encode_block([b"k%d" % tag], [VALUE], [b"v" * size])
    return CachedBlock(data, check_block(data))


def test_the_cache_stays_within_its_bytes_and_evicts_blocks_not_read_again() -> None:
    one = _block(0).cost
    cache = BlockCache(4 * one)
    for i in range(4):
        cache.put(cache_key(1, i), _block(i))
    assert cache.used == 4 * one
    assert cache.get(cache_key(1, 0)) is not None and cache.hits == 1  # block 0 is read again: kept
    for i in range(4, 40):
        block = _block(i)
        cache.put(cache_key(1, i), block)  # full: a first miss is only remembered
        cache.put(cache_key(1, i), block)  # a second one is admitted, evicting another
        assert cache.used <= cache.capacity
    assert cache.get(cache_key(1, 1)) is None and cache.get(cache_key(1, 39)) is not None
    assert cache.misses == 1 and cache.hits == 2


def test_a_full_cache_admits_a_block_on_its_second_miss_only() -> None:
    one = _block(0).cost
    cache = BlockCache(2 * one)
    cache.put(cache_key(1, 0), _block(0))
    cache.put(cache_key(1, 1), _block(1))
    cache.put(cache_key(2, 0), _block(2))
    assert cache.get(cache_key(2, 0)) is None  # read once while the cache was full: not worth a slot
    cache.put(cache_key(2, 0), _block(2))
    assert cache.get(cache_key(2, 0)) is not None and cache.used <= 2 * one


def test_a_dropped_table_leaves_no_block_behind() -> None:
    cache = BlockCache(1 << 20)
    for uid in (1, 2):
        for i in range(5):
            cache.put(cache_key(uid, i), _block(i))
    before = cache.used
    cache.drop_table(1, 5)
    assert all(cache.get(cache_key(1, i)) is None for i in range(5))
    assert all(cache.get(cache_key(2, i)) is not None for i in range(5))
    assert cache.used == before // 2


def test_compaction_uncaches_its_inputs_and_reads_stay_right() -> None:
    eng = LSMEngine(SimDisk(), "/db", replace(SMALL, auto_compact=False, block_cache_bytes=1 << 20))
    rng = random.Random(5)
    model: dict[bytes, bytes] = {}
    for round_ in range(4):
        for _ in range(60):
            key = b"key%03d" % rng.randrange(150)
            model[key] = b"v%d-" % round_ + key
            eng.put(key, model[key])
        eng.flush()
    for key, value in model.items():
        assert eng.get(key) == value  # fills the cache from every table
    old = eng._tree.version.tables
    cache = eng._cache
    assert any(ck >> 32 == t.uid for ck in cache.blocks for t in old)
    [report] = eng.compact(full=True)
    assert report.records_out == len(model)
    new_uids = {t.uid for t in eng._tree.version.tables}
    assert all(ck >> 32 in new_uids for ck in cache.blocks)  # nothing of the inputs is left
    assert cache.used == sum(b.cost for b in cache.blocks.values())
    for key, value in model.items():
        assert eng.get(key) == value
    assert eng.stats().block_cache_hits == cache.hits > 0
    assert eng.stats().block_cache_misses == cache.misses > 0


def test_the_sparse_index_finds_every_key_and_no_absent_one() -> None:
    disk = SimDisk()
    disk.makedirs("/t")
    rng = random.Random(9)
    keys = sorted({rng.randbytes(rng.randint(1, 12)) for _ in range(3000)})
    present, absent = keys[::2], keys[1::2]  # absent keys fall between, before and after blocks
    writer = TableWriter(disk, "/t/000001.sst", block_bytes=200)
    writer.add_all((k, VALUE, k[::-1]) for k in present)
    info = writer.finish()
    table = Table(disk, "/t/000001.sst", BlockCache(1 << 20))
    assert table.blocks == info.blocks > 50  # one index entry per block, not per key
    for _ in range(3):  # read from the file, then from decoded blocks in the cache
        assert all(table.get(k) == (VALUE, k[::-1]) for k in present)
        assert all(table.get(k) is None for k in absent)
    assert table.get(b"") is None and table.get(b"\xff" * 13) is None
    assert table._cache.hits > 0 and table._cache.used > 0
    uncached = Table(disk, "/t/000001.sst", BlockCache(0))  # every read searches the block's bytes
    assert all(uncached.get(k) == (VALUE, k[::-1]) for k in present)
    assert all(uncached.get(k) is None for k in absent)
    assert uncached._cache.hits == 0 and uncached._cache.misses > 0


def test_a_block_is_searched_in_its_bytes_as_when_decoded() -> None:
    """A key that is a substring of other keys, or spans two of them, is not found there; each
    key, deletions included, is found with its kind and value."""
    from bhandar_cli.storage.record_kinds import DELETE

    keys = [b"ab", b"abab", b"b", b"ba", b"bab", b"c" * 300]
    kinds = [VALUE, DELETE, VALUE, VALUE, DELETE, VALUE]
    values = [b"1", b"", b"33", b"", b"", b"6" * 50]
    block = parse_block(encode_block(keys, kinds, values))
    for key in [*keys, b"", b"a", b"bb", b"aba", b"abb", b"bc", b"c", b"c" * 301, b"d"]:
        j = block.find(key)
        expected = None if j is None else (block.kinds[j], block.value(j))
        assert find_in_block(block.raw, block.n, key) == expected, key
        assert (j is not None) == (key in keys)
