"""Opening a node's durable store in its data directory (the LSM engine on the real disk), and
where its snapshots go and how one is restored into it."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import TypedDict

from bhandar_cli.core.model import BadInput, Refused, Unavailable, check_snapshot_name, show_moment
from bhandar_cli.security import TLS_DIR, cipher_for
from bhandar_cli.storage import (
    ArchiveInfo,
    EngineOptions,
    FsyncPolicy,
    NoWriteTimes,
    SnapshotDamaged,
    Split,
    close_all,
    restore_snapshot,
    verify,
)
from bhandar_cli.storage import split as pitr_split
from bhandar_cli.storage.disk import RealDisk
from bhandar_cli.store.data_dir_lock import DirectoryLocked, lock_data_dir
from bhandar_cli.store.record_store import DATA as DATA_PREFIX
from bhandar_cli.store.record_store import RecordStore


class DataDirInUse(Unavailable):
    """Another process has this data directory open: the node's store is not available here."""


class LockedStore(RecordStore):
    """A node's store on the local disk: it holds its directory's lock
    (store/data_dir_lock.py) from open to close, across a `reopen`."""

    def __init__(self, disk: RealDisk, data_dir: str, options: EngineOptions) -> None:
        try:
            self._release = lock_data_dir(data_dir)
        except DirectoryLocked as exc:
            raise DataDirInUse(str(exc)) from None
        try:
            super().__init__(disk, data_dir, options)
        except BaseException:
            self._release()
            raise

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()


def open_node_store(data_dir: str, fsync: str = "batch", key: bytes | None = None) -> RecordStore:
    """The store of one node in `data_dir` (created if missing); recovery runs on open. The wall
    clock marks writes while a snapshot archives the WALs (storage/archive.py). With the data
    `key` (security/data_key.py) new WALs and tables are encrypted; without it an encrypted
    directory refuses to open (`DataKeyError`). Another process with the directory open refuses
    it too (`DataDirInUse`)."""
    disk = RealDisk()
    disk.makedirs(data_dir)
    options = EngineOptions(fsync=FsyncPolicy(fsync), wall_clock=time.time, cipher=cipher_for(key))
    return LockedStore(disk, data_dir, options)


def snapshot_path(root: Path, name: object, node: str) -> Path:
    """Where node `node` links the tables of snapshot `name`: ROOT/NAME/NODE. The name comes from
    a client: one that is not a plain name (a `/`, `..`, a leading dot) would make the node link
    its files outside its snapshot directory, so it is refused (core/model/limits.py)."""
    return root / check_snapshot_name(name) / node


def restore_node_dir(
    snapshot_dir: str, data_dir: str, node: str, until: float | None = None, key: bytes | None = None
) -> Split:
    """Replace a stopped node's data directory by its snapshot (hard links) plus the archived
    writes made up to `until` (none when None), as a new actor; returns what was kept and
    discarded. The WALs still in the data directory are archived first (storage/archive.py), so
    every write the node logged after the snapshot is in the archive.

    The restored node's own dot counters go back in time; writing under a new actor id
    (`Node.home_actor`) keeps it from reusing dots it handed out after the snapshot. The node's
    TLS identity (DATA_DIR/tls) is not data: it waits beside the directory and comes back. An
    encrypted node's archived WALs are read, and its restored WAL written, with its data `key`.
    """
    old = open_node_store(data_dir, key=key)
    restores = int(old.get_meta("restores") or 0) + 1
    limit = old.engine.options.archive_bytes
    old.close()
    disk = RealDisk()
    before = ArchiveInfo.load(disk, snapshot_dir)
    close_all(disk, data_dir, limit, time.time())
    try:
        split = pitr_split(disk, snapshot_dir, until, cipher_for(key))
    except NoWriteTimes as e:
        raise BadInput(f"node {node}: {e}") from None
    if before is not None and before.closed:
        split.ended, split.ended_at = True, before.closed_at
    identity = Path(data_dir) / TLS_DIR
    kept = Path(data_dir).with_name(f".{Path(data_dir).name}.{TLS_DIR}")  # same file system
    if identity.is_dir():
        identity.rename(kept)
    shutil.rmtree(data_dir)
    os.makedirs(data_dir, mode=0o700)
    restore_snapshot(disk, snapshot_dir, data_dir, split.kept, cipher_for(key))
    if kept.is_dir():
        kept.rename(identity)
    fresh = open_node_store(data_dir, key=key)
    fresh.put_meta("restores", restores)
    fresh.put_meta("actor", f"{node}~r{restores}")
    fresh.close()
    return split


LOCATION = "LOCATION"  # in SNAPSHOTS/NAME of a snapshot taken with to=DIR: where it went


def snapshot_home(local: Path) -> Path:
    """Where the node directories of a snapshot are: `local` (SNAPSHOTS/NAME), or DIR/NAME for a
    snapshot copied off with to=DIR (its LOCATION file says where)."""
    where = local / LOCATION
    return Path(where.read_text().strip()) if where.is_file() else local


def verify_snapshot(home: Path, nodes: list[str], until: float | None = None) -> int:
    """Check every node's snapshot files against their checksums before anything is stopped;
    Refused, naming the file, if one is missing or damaged; BadInput if `until` is before the
    snapshot was taken (its tables already hold later writes). Returns the files checked."""
    checked = 0
    for node in nodes:
        info = ArchiveInfo.load(RealDisk(), str(home / node))
        if until is not None and info is not None and info.taken is not None and until < info.taken:
            raise BadInput(
                f"until={show_moment(until)} is before snapshot {home.name} was taken "
                f"({show_moment(info.taken)}): restore an older snapshot, or give a later time"
            )
        try:
            checked += verify(RealDisk(), str(home / node))
        except SnapshotDamaged as e:
            raise Refused(
                f"restore refused: snapshot file {e.path} is damaged ({e.what}); nothing was changed"
            ) from None
    return checked


class RestoreSummary(TypedDict):
    """What a restore brought back and lost (`restore_summary`), in a restore's reply."""

    until: float | None  # the moment restored to (None: the last archived write)
    snapshot_taken: float | None
    replayed: int  # archived writes replayed onto the snapshot
    discarded: int  # archived writes after `until`, dropped
    rpo_s: float  # how far before `until` the last discarded write was
    warnings: list[str]


def restore_summary(home: Path, splits: dict[str, Split], until: float | None) -> RestoreSummary:
    """What a restore brought back and lost, over every node: writes are counted once however
    many replicas logged them (a data record's key and bytes name one write)."""
    data = DATA_PREFIX
    kept = {kv for s in splits.values() for kv in s.kept_keys if kv[0].startswith(data)}
    lost = {kv for s in splits.values() for kv in s.discarded_keys if kv[0].startswith(data)} - kept
    infos = [ArchiveInfo.load(RealDisk(), str(home / n)) for n in splits]
    taken = min((i.taken for i in infos if i is not None and i.taken is not None), default=None)
    since = until if until is not None else taken
    last_lost = max((s.last_discarded for s in splits.values() if s.last_discarded is not None), default=None)
    warnings = [p for s in splits.values() for p in s.problems]
    warnings += [
        f"the WAL archive of {n} filled up (archive_bytes): writes it logged later were not kept"
        for n, s in splits.items()
        if s.full
    ]
    ended = {n: s.ended_at for n, s in splits.items() if s.ended}
    if ended:
        # This snapshot's archive holds the timeline an earlier restore left: whatever the nodes
        # wrote after that restore was never archived for it, so the counts above leave it out.
        at = sorted({str(show_moment(t)) for t in ended.values() if t is not None})
        when = f" at {', '.join(at)}" if at else ""
        warnings.append(
            f"the WAL archive of {', '.join(sorted(ended))} ended with the restore{when}: the writes "
            "made since were never archived for this snapshot, so this restore discarded them "
            "without counting them (snapshot after a restore to keep the new timeline restorable)"
        )
    return {
        "until": until,
        "snapshot_taken": taken,
        "replayed": len(kept),
        "discarded": len(lost),
        "rpo_s": round(max(0.0, last_lost - since), 3) if lost and last_lost and since else 0.0,
        "warnings": warnings,
    }
