"""Encryption at rest in the storage engine: the framing (nonces, what the associated data binds),
sealed WALs and tables holding no plaintext, tampering found as corruption, the key check, plain
files of before still read, and point-in-time restore from encrypted archived WALs."""

from __future__ import annotations

import os
import random
import zlib
from dataclasses import replace

import pytest

from bhandar_cli.storage import archive, damage, pitr, wal
from bhandar_cli.storage.blocks import BlockCache
from bhandar_cli.storage.cipher import NONCE_BYTES, TABLE_BLOCK, WAL_RECORD, DataCipher
from bhandar_cli.storage.damage import DamageLog
from bhandar_cli.storage.disk.interface import join
from bhandar_cli.storage.disk.sim_disk import SimDisk
from bhandar_cli.storage.engine import LSMEngine
from bhandar_cli.storage.engine_options import EngineOptions
from bhandar_cli.storage.record_kinds import VALUE
from bhandar_cli.storage.recovery import restore_snapshot
from bhandar_cli.storage.sstable import Table
from bhandar_cli.storage.storage_errors import CorruptManifestError, DataKeyError
from bhandar_cli.storage.table_writer import TableWriter

from .conftest import SMALL

MARK = b"plaintext-marker-7c1e"


def _cipher(seed: int = 1) -> DataCipher:
    return DataCipher(random.Random(seed).randbytes(32), os.urandom)


def _rewrite(disk: SimDisk, path: str, data: bytes) -> None:
    if disk.exists(path):
        disk.remove(path)
    f = disk.open_append(path)
    f.write(data)
    f.sync()
    f.close()


def _all_bytes(disk: SimDisk, directory: str) -> dict[str, bytes]:
    out = {}
    for name in disk.listdir(directory):
        path = join(directory, name)
        if disk.exists(path) and name not in ("quarantine",):
            try:
                out[name] = disk.read(path)
            except (IsADirectoryError, KeyError, FileNotFoundError):
                continue
    return out


def test_nonces_never_repeat_and_the_same_plaintext_seals_differently() -> None:
    c = _cipher()
    sealed = [c.seal(b"same bytes", WAL_RECORD, b"f" * 8, 16) for _ in range(2000)]
    assert len({s[:NONCE_BYTES] for s in sealed}) == len(sealed)
    assert len(set(sealed)) == len(sealed)
    assert all(c.open(s, WAL_RECORD, b"f" * 8, 16) == b"same bytes" for s in sealed[:10])
    assert len({c.new_file_id() for _ in range(1000)}) == 1000


@pytest.mark.parametrize(
    "moved",
    [
        (WAL_RECORD, b"f" * 8, 4096),  # another offset in the same file
        (WAL_RECORD, b"g" * 8, 100),  # the same offset in another file
        (TABLE_BLOCK, b"f" * 8, 100),  # another kind of unit
    ],
)
def test_a_unit_opened_anywhere_but_where_it_was_sealed_fails(moved: tuple[bytes, bytes, int]) -> None:
    c = _cipher()
    sealed = c.seal(b"payload", WAL_RECORD, b"f" * 8, 100)
    assert c.open(sealed, WAL_RECORD, b"f" * 8, 100) == b"payload"
    with pytest.raises(ValueError, match="failed authentication"):
        c.open(sealed, *moved)
    with pytest.raises(ValueError, match="failed authentication"):
        _cipher(2).open(sealed, WAL_RECORD, b"f" * 8, 100)  # another key
    flipped = bytearray(sealed)
    flipped[NONCE_BYTES + 2] ^= 1
    with pytest.raises(ValueError):
        c.open(bytes(flipped), WAL_RECORD, b"f" * 8, 100)


def _sealed_table(disk: SimDisk, cipher: DataCipher) -> tuple[str, list[tuple[bytes, int, bytes | None]]]:
    disk.makedirs("/t")
    # Equal keys and values: every block but the last has the same length (for the swap below).
    records: list[tuple[bytes, int, bytes | None]] = [
        (b"k%05d" % i, VALUE, MARK + b"%05d" % i) for i in range(200)
    ]
    w = TableWriter(disk, "/t/000001.sst", block_bytes=256, cipher=cipher)
    w.add_all(records)
    assert w.finish().blocks > 4
    return "/t/000001.sst", records


def test_a_sealed_table_holds_no_plaintext_and_reads_back_only_with_its_key() -> None:
    disk, c = SimDisk(), _cipher()
    path, records = _sealed_table(disk, c)
    raw = disk.read(path)
    assert MARK not in raw and b"k00042" not in raw
    table = Table(disk, path, BlockCache(1 << 20), cipher=c)
    assert list(table.entries()) == records
    assert table.get(b"k00042") == (VALUE, MARK + b"00042")
    with pytest.raises(DataKeyError, match="no data key"):
        Table(disk, path)


def test_a_flipped_or_moved_sealed_block_is_a_corruption_that_costs_only_that_block() -> None:
    disk, c = SimDisk(), _cipher()
    path, records = _sealed_table(disk, c)
    clean = Table(disk, path, cipher=c)
    (o1, n1), (o2, n2) = (clean._offsets[1], clean._lengths[1]), (clean._offsets[2], clean._lengths[2])
    assert n1 == n2
    raw = bytearray(disk.read(path))
    raw[o2 : o2 + n2] = raw[o1 : o1 + n1]  # block 1, a valid sealed unit, in block 2's place
    raw[clean._offsets[3] + 40] ^= 0x10  # and one ciphertext byte of block 3 flipped
    _rewrite(disk, path, bytes(raw))
    log = DamageLog()
    table = Table(disk, path, BlockCache(0), verify=True, damage_log=log, cipher=c)
    found = log.take()
    assert [(x.kind, x.offset) for x in found] == [
        (damage.SSTABLE_BLOCK, o2),
        (damage.SSTABLE_BLOCK, clean._offsets[3]),
    ]
    assert all("failed authentication" in x.what for x in found)
    served = list(table.entries())
    assert served and set(served) < set(records)  # never a record of block 1 twice, never garbage
    assert len(served) == len(set(served))


def _engine(disk: SimDisk, cipher: DataCipher | None, directory: str = "/db", **kw: object) -> LSMEngine:
    return LSMEngine(disk, directory, replace(SMALL, cipher=cipher, **kw))  # type: ignore[arg-type]


def test_an_encrypted_engine_leaves_no_plaintext_in_its_wal_or_tables() -> None:
    disk, c = SimDisk(), _cipher()
    eng = _engine(disk, c)
    for i in range(100):
        eng.put(b"key%03d" % i, MARK + b"%03d" % i)
    eng.sync()
    assert eng.stats().sstables >= 1  # some of it in tables, the rest only in the WAL
    files = _all_bytes(disk, "/db")
    assert any(n.endswith(".log") for n in files) and any(n.endswith(".sst") for n in files)
    assert not [n for n, data in files.items() if MARK in data]
    eng.close()
    with _engine(disk, c) as again:
        assert all(again.get(b"key%03d" % i) == MARK + b"%03d" % i for i in range(100))


def test_a_wal_record_changed_on_disk_is_a_corruption_at_recovery_and_is_not_replayed() -> None:
    disk, c = SimDisk(), _cipher()
    eng = _engine(disk, c, memtable_bytes=1 << 20)
    for i in range(5):
        eng.put(b"k%d" % i, MARK)
    eng.close()
    [log_name] = [n for n in disk.listdir("/db") if n.endswith(".log")]
    path = join("/db", log_name)
    raw = bytearray(disk.read(path))
    parsed = wal.parse(bytes(raw), c)
    assert parsed.version == wal.ENCRYPTED_VERSION and len(parsed.payloads) == 5
    at = parsed.offsets[2]  # a deliberate change: a ciphertext byte, and the CRC made to match
    n = int.from_bytes(raw[at + 4 : at + 8], "little")
    raw[at + wal.HEADER_SIZE + 20] ^= 0x01
    body = bytes(raw[at + wal.HEADER_SIZE : at + wal.HEADER_SIZE + n])
    raw[at + 8 : at + 12] = zlib.crc32(body, zlib.crc32(bytes(raw[at + 4 : at + 8]))).to_bytes(4, "little")
    _rewrite(disk, path, bytes(raw))
    with _engine(disk, c) as again:
        [bad] = again.take_corruptions()
        assert (bad.kind, bad.file, bad.offset) == (damage.WAL_RECORD, path, at)
        assert [again.get(b"k%d" % i) for i in range(5)] == [MARK, MARK, None, MARK, MARK]


def test_an_encrypted_directory_refuses_no_key_or_another_key_and_changes_nothing() -> None:
    disk, c = SimDisk(), _cipher()
    with _engine(disk, c) as eng:
        for i in range(60):
            eng.put(b"key%03d" % i, MARK)
    before = _all_bytes(disk, "/db")
    with pytest.raises(DataKeyError, match="no data key was given"):
        _engine(disk, None)
    with pytest.raises(DataKeyError, match="not with the key given"):
        _engine(disk, _cipher(2))
    assert _all_bytes(disk, "/db") == before
    with _engine(disk, c) as again:
        assert again.get(b"key059") == MARK and not again.take_corruptions()


def test_plain_files_written_before_are_read_and_new_ones_are_sealed() -> None:
    disk, c = SimDisk(), _cipher()
    with _engine(disk, None) as plain:
        for i in range(60):
            plain.put(b"old%03d" % i, MARK)
    assert any(MARK in data for data in _all_bytes(disk, "/db").values())
    with _engine(disk, c) as eng:
        assert all(eng.get(b"old%03d" % i) == MARK for i in range(60))
        eng.compact(full=True)  # the old tables are rewritten sealed
        for i in range(10):
            eng.put(b"new%03d" % i, MARK)
    assert not [n for n, data in _all_bytes(disk, "/db").items() if MARK in data]
    with _engine(disk, c) as again:
        assert again.get(b"old000") == MARK and again.get(b"new009") == MARK


def test_point_in_time_restore_reads_encrypted_archived_wals() -> None:
    disk, c = SimDisk(), _cipher()
    now = [1000.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    options = EngineOptions(memtable_bytes=600, wall_clock=clock, cipher=c)
    eng = LSMEngine(disk, "data", options)
    for i in range(20):
        eng.put(b"a%02d" % i, MARK)
    eng.snapshot("snap")
    for i in range(30):
        eng.put(b"b%02d" % i, MARK)
    eng.close()
    archive.close_all(disk, "data", 1 << 30, 0.0)
    logs = archive.archived_logs(disk, "snap")
    assert logs and not [p for p in logs if MARK in disk.read(p)]
    with pytest.raises(DataKeyError):
        pitr.split(disk, "snap", now[0])
    split = pitr.split(disk, "snap", now[0], c)
    assert [k for k, _ in split.kept_keys] == [b"b%02d" % i for i in range(30)]
    restore_snapshot(disk, "snap", "restored", split.kept, c)
    assert not [n for n, data in _all_bytes(disk, "restored").items() if MARK in data]
    with LSMEngine(disk, "restored", EngineOptions(cipher=c)) as again:
        assert len(list(again.scan())) == 50


def test_a_sealed_table_whose_index_fails_is_quarantined_not_served() -> None:
    disk, c = SimDisk(), _cipher()
    with _engine(disk, c, auto_compact=False) as eng:
        for i in range(40):
            eng.put(b"key%03d" % i, MARK)
        eng.flush()
        [name] = eng.table_names[-1:]
    path = join("/db", name)
    table = Table(disk, path, cipher=c)
    index_off = table._offsets[-1] + table._lengths[-1]
    table.close()
    disk.flip_bit(path, bit=8 * (index_off + 30))
    with _engine(disk, c) as again:
        kinds = {x.kind for x in again.take_corruptions()}
        assert damage.SSTABLE in kinds and name not in again.table_names
        assert again.stats().quarantined and name in again.stats().quarantined[0]
        assert all(v == MARK for _, v in again.scan())  # what is served is never garbage


# --- someone with the data directory but not the key ---------------------------------------------


def _encrypted_with_tables(disk: SimDisk, c: DataCipher) -> list[str]:
    """An encrypting engine's directory with two sealed tables and a live WAL; their names."""
    with _engine(disk, c, auto_compact=False) as eng:
        for batch in range(2):
            for i in range(30):
                eng.put(b"key%d%03d" % (batch, i), MARK)
            eng.flush()
        eng.put(b"in-the-wal", MARK)
        return list(eng.table_names)


def _plain_files(disk: SimDisk) -> dict[str, bytes]:
    """A plain engine's table and WAL holding b"planted" -> b"evil" (written elsewhere)."""
    with _engine(disk, None, "/attacker", auto_compact=False) as eng:
        eng.put(b"planted", b"evil")
        eng.flush()
        eng.put(b"planted-in-wal", b"evil")
    files = _all_bytes(disk, "/attacker")
    return {ext: next(data for n, data in files.items() if n.endswith(ext)) for ext in (".sst", ".log")}


def test_plain_tables_and_wals_planted_in_an_encrypted_directory_are_refused() -> None:
    """A plain file needs no key to write: in place of a sealed table, or as a newer WAL, it would
    be served as the node's own data. An encrypting engine reads plain files only when they were
    there before it first encrypted the directory (its sealed MANIFEST lists them)."""
    disk, c = SimDisk(), _cipher()
    names = _encrypted_with_tables(disk, c)
    planted = _plain_files(disk)
    _rewrite(disk, join("/db", names[-1]), planted[".sst"])  # a listed table, replaced
    newest_log = max(int(n[:6]) for n in disk.listdir("/db") if n.endswith(".log"))
    disk_log = join("/db", f"{newest_log + 5:06d}.log")
    _rewrite(disk, disk_log, planted[".log"])  # a newer WAL: it would be replayed
    with _engine(disk, c) as eng:
        assert eng.get(b"planted") is None and eng.get(b"planted-in-wal") is None
        bad = eng.take_corruptions()
        assert {x.file for x in bad} >= {join("/db", names[-1]), disk_log}, bad
        assert all("plain" in x.what for x in bad if x.file in (join("/db", names[-1]), disk_log))
        assert names[-1] not in eng.table_names
        assert eng.get(b"key0000") == MARK and eng.get(b"in-the-wal") == MARK  # the rest is served


def _forged_plain_manifest(manifest_bytes: bytes, tables: list[str]) -> bytes:
    """A format-1 MANIFEST (a CRC, no key needed) with the same fields but `tables`."""
    import json

    body = json.loads(manifest_bytes.partition(b"\n")[2])
    body = {"next_file": body["next_file"], "log_number": body["log_number"], "tables": tables}
    raw = json.dumps(body, separators=(",", ":")).encode()
    return b"BHANDAR-MANIFEST 1 " + b"%08x\n" % zlib.crc32(raw) + raw


@pytest.mark.parametrize("how", ["edited", "forged-plain", "rolled-back", "removed-with-generation"])
def test_a_manifest_changed_or_rolled_back_without_the_key_is_refused_and_nothing_is_deleted(
    how: str,
) -> None:
    """The MANIFEST decides which tables live; every other table is deleted at open. Changed,
    replaced by an unauthenticated one, or put back from earlier (its tables since compacted
    away, the newer ones unlisted): the engine refuses to open rather than delete anything."""
    disk, c = SimDisk(), _cipher()
    names = _encrypted_with_tables(disk, c)
    path = join("/db", "MANIFEST")
    earlier = disk.read(path)
    with _engine(disk, c, auto_compact=False) as eng:  # a later state: one table, newer than both
        eng.compact(full=True)
        assert not set(eng.table_names) & set(names)
    current = disk.read(path)
    if how == "edited":
        _rewrite(disk, path, current.replace(b'"tables":["', b'"tables":["000001.sst","', 1))
    elif how == "forged-plain":
        _rewrite(disk, path, _forged_plain_manifest(current, []))
    elif how == "rolled-back":
        _rewrite(disk, path, earlier)
    else:
        disk.remove(path)
        disk.remove(join("/db", "GENERATION"))
    before = _all_bytes(disk, "/db")
    with pytest.raises(CorruptManifestError) as refused:
        _engine(disk, c)
    said = str(refused.value)
    assert {
        "edited": "fails its authentication",
        "forged-plain": "not sealed",
        "rolled-back": "rolled back",
        "removed-with-generation": "MANIFEST is missing but SSTables exist",
    }[how] in said, said
    assert _all_bytes(disk, "/db") == before  # nothing deleted, truncated or quarantined


def test_an_encrypted_directory_of_an_earlier_build_opens_and_its_manifest_is_sealed() -> None:
    """Before MANIFESTs were sealed an encrypting engine wrote format 1 and no GENERATION: such a
    directory opens as it is (all its tables sealed), and from then on its MANIFEST is sealed."""
    disk, c = SimDisk(), _cipher()
    names = _encrypted_with_tables(disk, c)
    path = join("/db", "MANIFEST")
    _rewrite(disk, path, _forged_plain_manifest(disk.read(path), names))
    disk.remove(join("/db", "GENERATION"))
    with _engine(disk, c) as eng:
        assert eng.table_names == names and eng.get(b"key1029") == MARK and eng.get(b"in-the-wal") == MARK
        assert not eng.take_corruptions()
    assert disk.read(path).startswith(b"BHANDAR-MANIFEST 2 ")
    assert disk.exists(join("/db", "GENERATION"))
