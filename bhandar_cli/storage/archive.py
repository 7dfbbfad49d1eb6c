"""The WAL archive of snapshots: the logs written after a snapshot, kept so that a restore can
bring back every write up to a chosen moment (point-in-time restore), and the snapshot's
checksum manifest.

A snapshot directory (written by `LSMEngine.snapshot`) holds:
  MANIFEST, NNNNNN.sst    the tables at the snapshot (hard links, or copies with `copy=True`)
  ARCHIVE                 JSON: first_log (the first WAL written after the snapshot), taken (wall
                          time of the snapshot, or null), bytes archived, full, closed
  wal/NNNNNN.log          the WALs archived since (each one complete: it was sealed and flushed)
  CHECKSUMS               JSON {"files": {relative path: [size, sha256]}}: every file above
                          except ARCHIVE and CHECKSUMS itself; a restore verifies them first

The data directory lists the snapshots it still archives for in `ARCHIVES` (JSON list of
snapshot directories). A WAL the engine would delete once its memtable is flushed is first
linked (or copied, across file systems) into the `wal/` of every listed snapshot it belongs to
(numbered ≥ its first_log), and its checksum is added. A snapshot directory that was deleted
stops its archive (the WALs are no longer needed); so does a full one (`archive_bytes` reached:
ARCHIVE says `full`, and a restore can bring back nothing written after that). The WALs not
flushed yet are still in the data directory: a restore `close`s the archive first, which links
those into `wal/` too. Every call goes through the `Disk`: no file is touched otherwise.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from bhandar_cli.storage.disk import Disk, join, write_file_atomically
from bhandar_cli.storage.manifest import file_name, file_number

ARCHIVES = "ARCHIVES"  # in the data directory
ARCHIVE = "ARCHIVE"  # in a snapshot directory
CHECKSUMS = "CHECKSUMS"
WAL_DIR = "wal"
_CHUNK = 1 << 20


class SnapshotDamaged(Exception):
    """A snapshot file is missing or does not match its checksum: the snapshot cannot be trusted."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path}: {what}")
        self.path, self.what = path, what


def _load_json(disk: Disk, path: str, default: Any) -> Any:
    if not disk.exists(path):
        return default
    try:
        return json.loads(disk.read(path))
    except ValueError as e:
        raise SnapshotDamaged(path, f"not valid JSON ({e})") from None


def _store_json(disk: Disk, path: str, value: Any) -> None:
    write_file_atomically(disk, path, json.dumps(value, sort_keys=True).encode())


def _chunks(disk: Disk, path: str) -> Iterator[bytes]:
    """The file's bytes in order, `_CHUNK` at a time (an archived WAL may be large)."""
    size, offset = disk.size(path), 0
    while offset < size:
        chunk = disk.read(path, offset, min(_CHUNK, size - offset))
        if not chunk:
            return
        yield chunk
        offset += len(chunk)


def digest(disk: Disk, path: str) -> tuple[int, str]:
    """(size, sha256 hex) of a file, read in chunks."""
    h = hashlib.sha256()
    for chunk in _chunks(disk, path):
        h.update(chunk)
    return disk.size(path), h.hexdigest()


def copy_file(disk: Disk, src: str, dst: str) -> None:
    """Copy `src` to a new file `dst` (fsynced), in chunks."""
    out = disk.open_append(dst)
    try:
        for chunk in _chunks(disk, src):
            out.write(chunk)
        out.sync()
    finally:
        out.close()


def place(disk: Disk, src: str, dst: str, copy: bool) -> None:
    """Hard-link `src` as `dst`, or copy it when asked or when a link cannot cross file systems."""
    if not copy:
        try:
            disk.link(src, dst)
            return
        except OSError:
            pass
    copy_file(disk, src, dst)


def add_checksums(disk: Disk, snapshot: str, names: list[str]) -> None:
    """Record the checksums of files (paths relative to `snapshot`) in its CHECKSUMS."""
    path = join(snapshot, CHECKSUMS)
    files = dict(_load_json(disk, path, {"files": {}})["files"])
    for name in names:
        files[name] = list(digest(disk, join(snapshot, name)))
    _store_json(disk, path, {"files": files})


def verify(disk: Disk, snapshot: str) -> int:
    """Check every file CHECKSUMS lists; returns how many. Raises SnapshotDamaged naming the first
    file that is missing or differs (a snapshot without CHECKSUMS predates them: nothing to check)."""
    files = _load_json(disk, join(snapshot, CHECKSUMS), {"files": {}})["files"]
    for name, (size, sha) in sorted(files.items()):
        path = join(snapshot, name)
        if not disk.exists(path):
            raise SnapshotDamaged(path, "listed in CHECKSUMS but missing")
        found = digest(disk, path)
        if found != (size, sha):
            raise SnapshotDamaged(
                path,
                f"checksum mismatch: {found[0]} bytes, sha256 {found[1][:12]}…; expected {size}, {sha[:12]}…",
            )
    return len(files)


@dataclass(frozen=True)
class ArchiveInfo:
    """A snapshot's ARCHIVE file."""

    first_log: int
    taken: float | None
    bytes: int = 0
    full: bool = False
    closed: bool = False
    closed_at: float | None = None  # wall time of the restore that ended the timeline (None: unknown)

    @classmethod
    def load(cls, disk: Disk, snapshot: str) -> ArchiveInfo | None:
        raw = _load_json(disk, join(snapshot, ARCHIVE), None)
        if raw is None:
            return None
        taken = raw.get("taken")
        return cls(
            int(raw["first_log"]),
            None if taken is None else float(taken),
            int(raw.get("bytes", 0)),
            bool(raw.get("full", False)),
            bool(raw.get("closed", False)),
            None if raw.get("closed_at") is None else float(raw["closed_at"]),
        )

    def store(self, disk: Disk, snapshot: str) -> None:
        _store_json(disk, join(snapshot, ARCHIVE), self.__dict__)


def start(disk: Disk, data_dir: str, snapshot: str, first_log: int, taken: float | None) -> None:
    """Begin archiving the WALs numbered ≥ `first_log` of `data_dir` into `snapshot`."""
    disk.makedirs(join(snapshot, WAL_DIR))
    ArchiveInfo(first_log, taken).store(disk, snapshot)
    listed = active(disk, data_dir)
    if snapshot not in listed:
        _store_json(disk, join(data_dir, ARCHIVES), [*listed, snapshot])


def active(disk: Disk, data_dir: str) -> list[str]:
    """The snapshot directories `data_dir` still archives its WALs for."""
    return [str(s) for s in _load_json(disk, join(data_dir, ARCHIVES), [])]


def _keep(disk: Disk, data_dir: str, snapshots: list[str]) -> None:
    _store_json(disk, join(data_dir, ARCHIVES), snapshots)


def retire_log(disk: Disk, data_dir: str, name: str, limit: int) -> None:
    """A WAL of `data_dir` is obsolete (its writes are in a table): archive it where a snapshot
    needs it, then delete it from the data directory."""
    path = join(data_dir, name)
    archive_into(disk, data_dir, [name], limit)
    disk.remove(path)


def archive_into(
    disk: Disk, data_dir: str, names: list[str], limit: int, closed_at: float | None = None
) -> list[str]:
    """Link (or copy) the WALs `names` of `data_dir` into every snapshot archiving them; with
    `closed_at` (the wall time of a restore), the archives stop there (a restore ends this data
    directory's timeline). Returns the snapshots still archiving."""
    close = closed_at is not None
    kept: list[str] = []
    listed = active(disk, data_dir)
    if not listed:
        return kept
    for snapshot in listed:
        info = ArchiveInfo.load(disk, snapshot) if disk.exists(snapshot) else None
        if info is None or info.closed:
            continue  # deleted, or not a snapshot any more: nothing needs the WALs
        added, size = [], info.bytes
        for name in names:
            parsed = file_number(name)
            dst = join(snapshot, WAL_DIR, name)
            if parsed is None or parsed[0] < info.first_log or info.full or disk.exists(dst):
                continue
            n = disk.size(join(data_dir, name))
            if size + n > limit:
                info = replace(info, bytes=size, full=True)
                break
            place(disk, join(data_dir, name), dst, copy=False)
            added.append(f"{WAL_DIR}/{name}")
            size += n
        if added:
            add_checksums(disk, snapshot, added)
        info = replace(info, bytes=size)
        if close and not info.closed:
            info = replace(info, closed=True, closed_at=closed_at)
        info.store(disk, snapshot)
        if not info.full and not info.closed:
            kept.append(snapshot)
    if kept != listed:
        _keep(disk, data_dir, kept)
    return kept


def close_all(disk: Disk, data_dir: str, limit: int, now: float) -> None:
    """Archive the WALs still live in `data_dir` into every snapshot archiving it and stop, noting
    `now` (wall time) as where each archive's timeline ends: the data directory is about to be
    replaced by a restore."""
    logs = sorted(n for n in disk.listdir(data_dir) if (p := file_number(n)) is not None and p[1] == "log")
    archive_into(disk, data_dir, logs, limit, closed_at=now)


def archived_logs(disk: Disk, snapshot: str) -> list[str]:
    """The paths of a snapshot's archived WALs, oldest first."""
    wal_dir = join(snapshot, WAL_DIR)
    parsed = [file_number(n) for n in disk.listdir(wal_dir)]
    numbers = sorted(p[0] for p in parsed if p is not None and p[1] == "log")
    return [join(wal_dir, file_name(n, "log")) for n in numbers]


def archive_stats(disk: Disk, data_dir: str) -> tuple[int, int]:
    """(snapshots archiving this data directory's WALs, bytes archived for them)."""
    snapshots = active(disk, data_dir)
    total = 0
    for snapshot in snapshots:
        info = ArchiveInfo.load(disk, snapshot) if disk.exists(snapshot) else None
        total += 0 if info is None else info.bytes
    return len(snapshots), total
