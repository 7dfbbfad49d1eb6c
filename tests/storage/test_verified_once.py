"""A block's CRC is checked whole once per open table; after that a read from the file checks only
the bytes its answer depends on (the block's head and the one value) against digests taken at
that check. What that promises when a byte flips after the check: no answer is ever made from a
changed byte; the damage is found, logged and reported by the first read that depends on it, by
the next open of the table (which checks every block whole again) and by a compaction (which
reads every block whole), and it costs the block's records, as before."""

from __future__ import annotations

import bisect
import random

import pytest

from bhandar_cli.storage.blocks import PAIR, BlockCache
from bhandar_cli.storage.damage import DamageLog
from bhandar_cli.storage.disk.sim_disk import SimDisk
from bhandar_cli.storage.engine import LSMEngine
from bhandar_cli.storage.record_kinds import DELETE, VALUE
from bhandar_cli.storage.sstable import Table
from bhandar_cli.storage.table_writer import TableWriter

from .conftest import small_engine

Records = list[tuple[bytes, int, bytes | None]]
PATH = "/t/000001.sst"


def _table_file(disk: SimDisk, n: int = 60, seed: int = 0) -> Records:
    rng = random.Random(seed)
    keys = sorted({b"key-%06d" % rng.randrange(10**6) for _ in range(n)})
    records: Records = [
        (k, DELETE, None) if rng.random() < 0.1 else (k, VALUE, rng.randbytes(rng.randrange(1, 40)))
        for k in keys
    ]
    disk.makedirs("/t")
    w = TableWriter(disk, PATH, block_bytes=256)
    w.add_all(records)
    assert w.finish().blocks > 3
    return records


def _verified(disk: SimDisk, cache_bytes: int = 0) -> tuple[Table, DamageLog]:
    """The table opened and checked whole; with no cache, every get reads its block from the file."""
    log = DamageLog()
    return Table(disk, PATH, BlockCache(cache_bytes), verify=True, damage_log=log), log


def _value_byte(table: Table, block: int, record: int) -> int:
    """The file offset of the first byte of record `record`'s value in block `block`."""
    off: int = table._offsets[block]
    raw = table._file.pread(off, table._lengths[block])
    n = int.from_bytes(raw[:4], "little")
    start: int = PAIR.unpack_from(raw, 4 + n + 4 * (n + record))[0]
    return off + start


def _records_of_block(table: Table, records: Records, block: int) -> Records:
    return [r for r in records if bisect.bisect_left(table._last_keys, r[0]) == block]


def test_a_byte_flipped_in_one_value_after_the_check_costs_only_the_reads_of_that_value() -> None:
    disk = SimDisk()
    records = _table_file(disk)
    table, log = _verified(disk)
    block = 1
    mine = _records_of_block(table, records, block)
    victim = next(j for j, (_, kind, value) in enumerate(mine) if kind == VALUE and value)
    disk.flip_bit(PATH, bit=8 * _value_byte(table, block, victim))
    # Every other record of the block still answers, from bytes checked against its digests.
    for j, (key, kind, value) in enumerate(mine):
        if j != victim:
            assert table.get(key) == (kind, value)
    assert log.take() == []
    # The read of the changed value finds the damage: reported once, for the whole block.
    assert table.get(mine[victim][0]) is None
    [c] = log.take()
    assert (c.kind, c.offset) == ("sstable_block", table._offsets[block])
    assert "checksum mismatch" in c.what and c.lost is not None
    assert all(c.lost.overlaps(k, k + b"\0") for k, _, _ in mine)
    # From then on the block is bad, as if a whole check had found it: its records are lost
    # (the engine's caller repairs them from the replicas), never served.
    assert all(table.get(k) is None for k, _, _ in mine)
    assert log.take() == []


def test_a_byte_flipped_after_the_check_is_found_when_the_table_is_opened_again() -> None:
    disk = SimDisk()
    records = _table_file(disk)
    table, log = _verified(disk)
    mine = _records_of_block(table, records, 2)
    victim = next(j for j, (_, kind, value) in enumerate(mine) if kind == VALUE and value)
    disk.flip_bit(PATH, bit=8 * _value_byte(table, 2, victim) + 3)
    assert table.get(mine[victim - 1 if victim else victim + 1][0]) is not None and log.take() == []
    _, again = _verified(disk)
    [c] = again.take()
    assert (c.kind, c.offset) == ("sstable_block", table._offsets[2])


@pytest.mark.parametrize("cache_bytes", [0, 1000])
def test_every_flipped_bit_after_the_check_is_either_found_or_not_read(cache_bytes: int) -> None:
    """Flip each byte of a checked table in turn (one bit of it): every get answers its record
    or nothing, and a get that answers nothing where the record exists has reported damage.
    Never a changed value, a changed kind or another key's record. With a cache of two blocks,
    blocks read through their digests are also admitted (checked whole) and evicted."""
    disk = SimDisk()
    records = _table_file(disk, n=40, seed=3)
    size = disk.size(PATH)
    data_end = Table(disk, PATH).block_index()[-1]
    data_end_at = data_end[0] + data_end[1]
    absent = [b"key-" + bytes(6), b"key-999999x", records[5][0] + b"\0"]
    for at in range(data_end_at):  # the data blocks (the index, filter and footer are read at open)
        table, log = _verified(disk, cache_bytes)
        bit = 8 * at + at % 8
        disk.flip_bit(PATH, bit=bit)
        for key, kind, value in records:
            got = table.get(key)
            assert got in ((kind, value), None), f"byte {at}: {key!r} read as {got!r}"
            if got is None:
                assert log.counts["sstable_block"] == 1, f"byte {at}: {key!r} lost unreported"
        for key in absent:
            assert table.get(key) is None
        assert bool(table._cache.blocks) == bool(cache_bytes)
        disk.flip_bit(PATH, bit=bit)  # put it back for the next one
    assert disk.size(PATH) == size


def _one_table_engine(disk: SimDisk) -> LSMEngine:
    return small_engine(disk, auto_compact=False, block_cache_bytes=0, memtable_bytes=1 << 20)


def test_a_compaction_reads_every_block_whole_and_finds_a_flip_the_gets_did_not_read() -> None:
    disk = SimDisk()
    eng = _one_table_engine(disk)
    for i in range(40):
        eng.put(b"k%03d" % i, b"value-%03d" % i)
    name = eng.flush()
    eng.close()
    eng = _one_table_engine(disk)  # opens the table and checks it whole
    assert eng.take_corruptions() == []
    [table] = eng._tree.version.tables
    disk.flip_bit(f"/db/{name}", bit=8 * _value_byte(table, 0, 1))  # k001's value
    assert eng.get(b"k000") == b"value-000" and eng.take_corruptions() == []
    eng.compact(full=True)
    [c] = eng.take_corruptions()
    assert (c.kind, c.file, c.offset) == ("sstable_block", f"/db/{name}", 0)
    assert eng.get(b"k001") is None  # lost with its block, for the replicas to repair
    assert eng.get(b"k039") == b"value-039"
    eng.close()
