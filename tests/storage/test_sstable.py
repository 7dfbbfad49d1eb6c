"""SSTable round trip, and corruption: a flipped bit anywhere is caught and never served."""

from __future__ import annotations

import random

import pytest

from bhandar_cli.sim.disk import SimDisk
from bhandar_cli.storage.bloom import bloom_hash
from bhandar_cli.storage.errors import CorruptTableError
from bhandar_cli.storage.records import DELETE, VALUE
from bhandar_cli.storage.sstable import FOOTER_SIZE, BlockCache, Table, TableWriter

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
        assert table.may_contain_hash(bloom_hash(key))
        assert table.get(key) == (kind, value)
    assert table.get(b"\xff" * 20) is None and table.get(b"") is None
    lo, hi = records[50][0], records[300][0]
    assert list(table.entries(lo, hi)) == records[50:300]
    assert list(table.entries(None, records[0][0])) == []


def test_every_bit_of_the_footer_and_random_bits_elsewhere_are_detected() -> None:
    disk = SimDisk()
    path = _table(disk, _records(300))
    size = disk.size(path)
    rng = random.Random(7)
    bits = list(range((size - FOOTER_SIZE) * 8, size * 8)) + [rng.randrange(size * 8) for _ in range(400)]
    for bit in bits:
        disk.flip_bit(path, bit)
        with pytest.raises(CorruptTableError) as info:
            Table(disk, path, verify=True)
        assert info.value.path == path
        assert str(info.value).startswith(f"corrupt SSTable {path}: ")
        disk.flip_bit(path, bit)  # flip it back
    Table(disk, path, verify=True)  # and the intact file opens


def test_damage_after_open_is_caught_when_the_block_is_read() -> None:
    disk = SimDisk()
    records = _records(300)
    path = _table(disk, records)
    table = Table(disk, path, BlockCache(0), verify=True)
    disk.flip_bit(path, bit=8 * 20)  # inside block 0
    with pytest.raises(CorruptTableError, match="block 0 checksum mismatch"):
        table.get(records[0][0])


def test_a_torn_table_is_not_a_table() -> None:
    disk = SimDisk()
    path = _table(disk, _records(100))
    disk.truncate(path, disk.size(path) - 10)
    with pytest.raises(CorruptTableError, match=r"bad magic number|footer"):
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


def test_engine_quarantines_a_corrupt_table_at_open_and_serves_the_rest() -> None:
    disk = SimDisk()
    newer = _two_generations(disk)
    disk.flip_bit(f"/db/{newer}", rng=random.Random(1))
    eng = small_engine(disk)
    # Never served: the damaged newer table is gone, the older one still answers.
    assert eng.get(b"k") == b"old"
    assert eng.get(b"only-new") is None
    assert eng.get(b"only-old") == b"x"
    assert eng.table_names == [n for n in eng.table_names if n != newer]
    [q] = eng.recovery.quarantined
    assert q.table == newer and q.moved_to == f"/db/quarantine/{newer}"
    assert disk.exists(q.moved_to) and not disk.exists(f"/db/{newer}")
    assert any(m.startswith(f"SSTable {newer} quarantined: ") for m in eng.recovery.messages)
    assert eng.stats().quarantined[0].startswith(f"{newer}: ")
    eng.close()
    assert small_engine(disk).get(b"k") == b"old"  # the MANIFEST no longer lists it


def test_engine_quarantines_a_table_damaged_while_open() -> None:
    disk = SimDisk()
    newer = _two_generations(disk)
    eng = small_engine(disk, block_cache_bytes=0)
    disk.flip_bit(f"/db/{newer}", bit=8 * 5)  # block 0 of the newer table
    assert eng.get(b"k") == b"old"
    assert [q.split(":")[0] for q in eng.stats().quarantined] == [newer]
    assert "block 0 checksum mismatch" in eng.stats().quarantined[0]
    eng.put(b"k", b"newest")
    assert eng.get(b"k") == b"newest"
