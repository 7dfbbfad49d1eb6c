"""SSTable round trip, and corruption: a flipped bit anywhere is caught, never served, and costs
only the records of the block it hit."""

from __future__ import annotations

import bisect
import random

import pytest

from bhandar_cli.storage.blocks import BlockCache
from bhandar_cli.storage.damage import Corruption, DamageLog, KeyInterval
from bhandar_cli.storage.disk.sim_disk import SimDisk
from bhandar_cli.storage.record_kinds import DELETE, VALUE
from bhandar_cli.storage.sstable import Table
from bhandar_cli.storage.storage_errors import CorruptTableError
from bhandar_cli.storage.table_writer import FOOTER_SIZE, TableWriter

from .conftest import small_engine


def _records(n: int, seed: int = 0) -> list[tuple[bytes, int, bytes | None]]:
    rng = random.Random(seed)
    keys = sorted({rng.randbytes(rng.randrange(1, 12)) for _ in range(n)})
    return [
        (k, DELETE, None) if rng.random() < 0.1 else (k, VALUE, rng.randbytes(rng.randrange(50)))
        for k in keys
    ]


def _table(disk: SimDisk, records: list[tuple[bytes, int, bytes | None]], path: str = "/t/000001.sst") -> str:
    disk.makedirs("/t")
    w = TableWriter(disk, path, block_bytes=256)
    w.add_all(records)
    info = w.finish()
    assert info.records == len(records) and info.blocks > 3
    return path


def test_round_trip_get_and_ranges() -> None:
    disk = SimDisk()
    records = _records(400)
    table = Table(disk, _table(disk, records), BlockCache(1 << 20))
    assert list(table.entries()) == records
    for key, kind, value in records:
        assert table.may_contain(key)
        assert table.get(key) == (kind, value)
    assert table.get(b"\xff" * 20) is None and table.get(b"") is None
    lo, hi = records[50][0], records[300][0]
    assert list(table.entries(lo, hi)) == records[50:300]
    assert list(table.entries(None, records[0][0])) == []


def _opened(disk: SimDisk, path: str) -> tuple[Table, list[Corruption]]:
    log = DamageLog()
    table = Table(disk, path, BlockCache(0), verify=True, damage_log=log)
    return table, log.take()


def _block_of(table: Table, key: bytes) -> int:
    return bisect.bisect_left(table._last_keys, key)


def test_a_bad_data_block_loses_only_its_own_records_and_says_where() -> None:
    disk = SimDisk()
    records = _records(300)
    path = _table(disk, records)
    clean = Table(disk, path)
    bad = 2
    offset, length = clean._offsets[bad], clean._lengths[bad]
    disk.flip_bit(path, bit=8 * (offset + length // 2))
    table, [c] = _opened(disk, path)
    assert (c.kind, c.file, c.offset, c.length) == ("sstable_block", path, offset, length)
    assert c.lost == KeyInterval(clean._last_keys[bad - 1], clean._last_keys[bad])
    assert f"{path} at offset {offset}" in c.message
    lost = [r for r in records if _block_of(clean, r[0]) == bad]
    kept = [r for r in records if _block_of(clean, r[0]) != bad]
    assert lost and all(c.lost.overlaps(k, k + b"\0") for k, _, _ in lost)
    assert list(table.entries()) == kept  # scans skip the block
    for key, kind, value in records:
        assert table.get(key) == (None if (key, kind, value) in lost else (kind, value))


@pytest.mark.parametrize("part", ["index", "bloom", "footer"])
def test_damage_to_the_index_bloom_or_footer_is_rebuilt_from_the_data(part: str) -> None:
    disk = SimDisk()
    records = _records(300)
    path = _table(disk, records)
    size = disk.size(path)
    clean = Table(disk, path)
    index_off = clean._offsets[-1] + clean._lengths[-1]
    at = {"index": index_off + 3, "bloom": size - FOOTER_SIZE - 5, "footer": size - FOOTER_SIZE + 9}[part]
    disk.flip_bit(path, bit=8 * at + 1)
    table, [c] = _opened(disk, path)
    assert c.kind == f"sstable_{part}" and c.file == path and c.offset <= at < c.offset + c.length
    assert c.lost is None and "no record lost" in c.message
    assert list(table.entries()) == records
    assert all(table.get(k) == (kind, v) for k, kind, v in records)


def test_damage_after_open_is_caught_when_the_block_is_read() -> None:
    disk = SimDisk()
    records = _records(300)
    path = _table(disk, records)
    log = DamageLog()
    table = Table(disk, path, BlockCache(0), verify=True, damage_log=log)
    disk.flip_bit(path, bit=8 * 20)  # inside block 0
    assert table.get(records[0][0]) is None
    [c] = log.take()
    assert c.kind == "sstable_block" and c.offset == 0 and "block 0 checksum mismatch" in c.what
    table.get(records[0][0])
    assert log.take() == [] and log.counts["sstable_block"] == 1  # reported once


def test_a_torn_table_keeps_its_blocks() -> None:
    disk = SimDisk()
    records = _records(100)
    path = _table(disk, records)
    disk.truncate(path, disk.size(path) - 10)
    table, [c] = _opened(disk, path)
    assert c.kind == "sstable_footer" and list(table.entries()) == records
    disk.truncate(path, FOOTER_SIZE + 6)  # not even one block is left
    with pytest.raises(CorruptTableError, match="no data block"):
        Table(disk, path)


def _two_generations(disk: SimDisk) -> str | None:
    """Key k has 'old' in the older table and 'new' in the newer one."""
    eng = small_engine(disk, auto_compact=False)
    eng.put(b"k", b"old")
    eng.put(b"only-old", b"x")
    eng.flush()
    eng.put(b"k", b"new")
    eng.put(b"only-new", b"y")
    newer = eng.flush()
    eng.close()
    return newer


def test_engine_loses_only_the_bad_block_reports_it_and_rewrites_the_table() -> None:
    disk = SimDisk()
    newer = _two_generations(disk)
    disk.flip_bit(f"/db/{newer}", bit=8 * 5)  # block 0 of the newer table: both its keys
    eng = small_engine(disk)
    [c] = eng.take_corruptions()
    assert (c.kind, c.file, c.offset) == ("sstable_block", f"/db/{newer}", 0)
    assert eng.get(b"k") == b"old" and eng.get(b"only-new") is None and eng.get(b"only-old") == b"x"
    assert eng.stats().corruptions == {"sstable_block": 1}
    assert eng.needs_compaction
    eng.compact()  # the damaged table alone, rewritten; the file goes to quarantine/
    assert newer not in eng.table_names and disk.exists(f"/db/quarantine/{newer}")
    eng.close()
    again = small_engine(disk)
    assert again.take_corruptions() == [] and again.get(b"only-old") == b"x"


def test_engine_quarantines_a_table_cut_short_while_open() -> None:
    disk = SimDisk()
    newer = _two_generations(disk)
    eng = small_engine(disk, block_cache_bytes=0)
    disk.truncate(f"/db/{newer}", 3)
    assert eng.get(b"k") == b"old"
    assert [q.split(":")[0] for q in eng.stats().quarantined] == [newer]
    [c] = eng.take_corruptions()
    assert c.kind == "sstable" and c.file == f"/db/{newer}" and c.lost == KeyInterval()
    eng.put(b"k", b"newest")
    assert eng.get(b"k") == b"newest"
