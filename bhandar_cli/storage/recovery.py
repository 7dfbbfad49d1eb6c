"""Opening a storage directory after any crash, quarantining damaged tables, restoring snapshots.

`recover` reads the directory and returns what the engine needs to resume; its only writes are
the ones recovery must make: deleting `*.tmp` files and orphans, truncating a torn WAL tail and
moving tables that cannot be opened at all to `quarantine/`. Each step is safe to repeat if the
open itself crashes. Every corruption met (a bad block, a skipped WAL stretch, a quarantined
table, a listed table that is missing) goes to the engine's `DamageLog`; a torn WAL tail is a
crash's normal trace, not one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bhandar_cli.storage import archive, damage, manifest, wal
from bhandar_cli.storage.blocks import BlockCache
from bhandar_cli.storage.cipher import DataCipher, check_key
from bhandar_cli.storage.damage import Corruption, DamageLog, KeyInterval
from bhandar_cli.storage.disk import Disk, join
from bhandar_cli.storage.manifest import Manifest, file_name, file_number
from bhandar_cli.storage.memtable import Memtable
from bhandar_cli.storage.record_kinds import Merge, decode_log_link, decode_op, decode_time_mark
from bhandar_cli.storage.reports import Quarantined
from bhandar_cli.storage.sstable import Table
from bhandar_cli.storage.storage_errors import CorruptManifestError, CorruptTableError
from bhandar_cli.storage.wal import WALReport

QUARANTINE = "quarantine"


@dataclass(frozen=True)
class Recovered:
    manifest: Manifest
    had_manifest: bool
    next_file: int  # above every number in the MANIFEST and in the directory
    names: list[str]  # live tables, oldest first (the MANIFEST's minus quarantined ones)
    tables: list[Table]
    memtable: Memtable  # the replayed WAL records
    logs: list[int]  # live WAL numbers, in order
    wal_reports: list[WALReport]
    orphans: list[str]
    quarantined: list[Quarantined]
    plain: tuple[str, ...] = ()  # plain tables and WALs kept that an encrypting engine may read


def recover(
    disk: Disk,
    directory: str,
    cache: BlockCache,
    log: DamageLog,
    *,
    verify: bool,
    merge: Merge | None,
    archive_limit: int = 1 << 30,
    cipher: DataCipher | None = None,
) -> Recovered:
    disk.makedirs(directory)
    marked = check_key(disk, directory, cipher)  # before anything is read, changed or quarantined
    names = disk.listdir(directory)
    for name in names:
        if name.endswith(".tmp"):  # an interrupted atomic write: its target is intact
            disk.remove(join(directory, name))
    files = {n: parsed for n in names if (parsed := file_number(n)) is not None}
    m = manifest.load(disk, directory, cipher)
    if cipher is not None:
        manifest.check_generation(disk, directory, m, cipher)  # removed, unsealed or rolled back
    had_manifest = m is not None
    if m is None:
        if any(ext == "sst" for _, ext in files.values()):
            raise CorruptManifestError(directory, "MANIFEST is missing but SSTables exist; refusing to guess")
        m = Manifest()
    next_file = max([m.next_file, *(num + 1 for num, _ in files.values())])
    # The plain files an encrypting engine reads: when a directory is first encrypted, all it held
    # from before; from then on only those its sealed MANIFEST lists (None: no limit).
    plain_ok: frozenset[str] | None = None
    if cipher is not None and (marked or m.sealed):
        plain_ok = frozenset(m.plain)

    live: list[str] = []
    tables: list[Table] = []
    quarantined: list[Quarantined] = []
    for name in m.tables:
        path = join(directory, name)
        if not disk.exists(path):
            # Removed while the engine was closed (by hand, a bad restore, a disk fault): every
            # record it held is lost, a tombstone too, so an older value of its key reads again.
            # Reported as damage to every key (the MANIFEST does not keep a table's key range), for
            # the node to refuse reads of its copy and repair it from the replicas.
            log.add(Corruption(damage.SSTABLE_MISSING, path, 0, 0, MISSING, KeyInterval()))
            quarantined.append(Quarantined(name, MISSING, None))
            continue
        try:
            table = Table(disk, path, cache, verify=verify, damage_log=log, cipher=cipher)
        except CorruptTableError as e:
            log.add(table_lost(path, disk.size(path), e.what))
            quarantined.append(move_to_quarantine(disk, directory, name, e.what))
            continue
        if plain_ok is not None and not table.encrypted and name not in plain_ok:
            table.close()
            log.add(table_lost(path, disk.size(path), PLANTED))
            quarantined.append(move_to_quarantine(disk, directory, name, PLANTED))
            continue
        tables.append(table)
        live.append(name)

    orphans = []
    listed = set(m.tables)
    for name, (num, ext) in sorted(files.items()):
        # Tables of an interrupted flush or compaction, and logs already flushed into tables.
        if ext == "log" and num < m.log_number:  # a snapshot may still need it: archive.py
            archive.retire_log(disk, directory, name, archive_limit)
            orphans.append(name)
        elif ext == "sst" and name not in listed:
            disk.remove(join(directory, name))
            orphans.append(name)

    memtable = Memtable()
    logs = sorted(num for num, ext in files.values() if ext == "log" and num >= m.log_number)
    kept, reports = _replay_logs(disk, directory, logs, memtable, merge, cipher, plain_ok, log)
    for report in reports:
        for span in report.corrupt:
            what = "no valid WAL record here; replay resumed at the next one"
            if report.problem == "corrupt":
                what = "a bad WAL record (format 1: replay stopped there)"
            path = join(directory, report.name)
            log.add(Corruption(damage.WAL_RECORD, path, span.offset, span.length, what, KeyInterval()))
    sealed_logs = any(r.version == wal.ENCRYPTED_VERSION and r.records for r in reports)
    if cipher is not None and plain_ok is None and (sealed_logs or any(t.encrypted for t in tables)):
        # Encrypted files, yet neither KEYCHECK nor a sealed MANIFEST: both were removed or
        # replaced, as someone would who wants plain files of their own read here.
        raise CorruptManifestError(
            directory, "holds encrypted files but no KEYCHECK and no sealed MANIFEST (removed or replaced?)"
        )
    plain = tuple(
        sorted(
            {n for n, t in zip(live, tables, strict=True) if not t.encrypted}
            | {r.name for r in reports if r.version != wal.ENCRYPTED_VERSION and r.problem != "gap"}
        )
    )
    if plain_ok is not None:
        plain = tuple(n for n in plain if n in plain_ok)
    return Recovered(
        m, had_manifest, next_file, live, tables, memtable, kept, reports, orphans, quarantined, plain
    )


MISSING = "listed in MANIFEST but missing (removed while the store was closed?)"
# Why a plain table or WAL is refused in an encrypted directory.
PLANTED = "a plain file in an encrypted directory, not one its MANIFEST lists as written before (planted?)"


def _replay_logs(
    disk: Disk,
    directory: str,
    logs: list[int],
    memtable: Memtable,
    merge: Merge | None,
    cipher: DataCipher | None,
    plain_ok: frozenset[str] | None = None,
    log: DamageLog | None = None,
) -> tuple[list[int], list[WALReport]]:
    """Replay WALs in order into `memtable`, up to the first gap (see record_kinds.py's log links);
    the WALs after a gap are deleted, and a plain one an encrypting engine may not read (not in
    `plain_ok`) is quarantined unread. Returns the WALs kept and a report for every WAL."""
    reports: list[WALReport] = []
    previous: tuple[int, int] | None = None  # (number, length kept) of the last WAL replayed
    refused: list[int] = []
    for i, number in enumerate(logs):
        name = file_name(number, "log")
        path = join(directory, name)
        if plain_ok is not None and name not in plain_ok and not wal.is_sealed(disk.read(path, 0, 12)):
            size = disk.size(path)
            if log is not None:
                log.add(Corruption(damage.WAL_RECORD, path, 0, size, PLANTED, KeyInterval()))
            move_to_quarantine(disk, directory, name, PLANTED)
            refused.append(number)
            continue
        payloads, report = wal.replay(disk, path, name, cipher)
        link = decode_log_link(payloads[0]) if payloads else None
        if link is not None and previous is not None and link[0] == previous[0] and previous[1] < link[1]:
            for later in (n for n in logs[i:] if n not in refused):
                later_name = file_name(later, "log")
                size = disk.size(join(directory, later_name))
                disk.remove(join(directory, later_name))
                reports.append(WALReport(later_name, 0, 0, size, "gap"))
            return [n for n in logs[:i] if n not in refused], reports
        if link is not None:
            payloads, report = payloads[1:], replace(report, records=report.records - 1)
        for j, payload in enumerate(payloads):
            if decode_time_mark(payload) is not None:
                continue  # when the next writes were made: for a point-in-time restore only
            try:
                kind, key, value = decode_op(payload)
            except ValueError as e:
                raise CorruptManifestError(
                    directory, f"WAL {name} record {j} passes its checksum but is unreadable: {e} (a bug)"
                ) from None
            memtable.apply(kind, key, value, merge)
        reports.append(report)
        previous = (number, report.bytes_replayed)
    return [n for n in logs if n not in refused], reports


def table_lost(path: str, size: int, what: str) -> Corruption:
    """The corruption of a table that cannot be served at all: any of its keys may be lost."""
    return Corruption(damage.SSTABLE, path, 0, size, f"{what} (the table is quarantined)", KeyInterval())


def move_to_quarantine(disk: Disk, directory: str, name: str, reason: str) -> Quarantined:
    """Move a damaged table aside (kept for inspection, never read again)."""
    qdir = join(directory, QUARANTINE)
    disk.makedirs(qdir)
    dest, n = join(qdir, name), 1
    while disk.exists(dest):
        dest, n = join(qdir, f"{name}.{n}"), n + 1
    disk.rename(join(directory, name), dest)
    return Quarantined(name, reason, dest)


def restore_snapshot(
    disk: Disk,
    snapshot: str,
    directory: str,
    replay: list[bytes] | None = None,
    cipher: DataCipher | None = None,
) -> None:
    """Make `directory` (new or empty) a copy of a snapshot by hard links (copies across file
    systems); then open it. `replay`: WAL payloads (operations) written after the snapshot to
    bring back too, as one WAL the next open replays (see pitr.py), sealed under `cipher`."""
    m = manifest.load(disk, snapshot, cipher)
    if m is None:
        raise CorruptManifestError(snapshot, "not a snapshot: no MANIFEST (a snapshot cut short?)")
    # The snapshot's plain tables (of before encryption, or of a snapshot taken before MANIFESTs
    # were sealed) stay readable in the restored directory: the operator chose this snapshot.
    plain = m.plain if m.sealed else m.tables
    if disk.listdir(directory):
        raise ValueError(f"restore target {directory} is not empty")
    disk.makedirs(directory)
    for name in m.tables:
        archive.place(disk, join(snapshot, name), join(directory, name), copy=False)
    if replay:
        number = max(m.next_file, m.log_number)
        writer = wal.WALWriter(disk, join(directory, file_name(number, "log")), wal.FsyncPolicy.BATCH, cipher)
        try:
            for payload in replay:
                writer.append(payload)
            writer.sync()
        finally:
            writer.close()
        m = replace(m, next_file=number + 1, log_number=number)
    manifest.store(disk, directory, replace(m, plain=plain, sealed=cipher is not None), cipher)
