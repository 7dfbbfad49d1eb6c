"""Point-in-time restore: which archived writes a restore brings back, and which it discards.

A snapshot's archive (archive.py) holds every WAL written after it, in order; each write there
follows a time mark (record_kinds.py) saying when it was made. `split` replays them as recovery does
(wal.parse: a torn tail or a damaged stretch costs only its own records) and cuts at `until`:
the writes made at or before it are kept (their payloads go into the restored directory as one
WAL, see recovery.restore_snapshot), the later ones are discarded and counted. Without `until`
the restore goes back to the snapshot itself and every archived write is discarded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bhandar_cli.storage import archive, wal
from bhandar_cli.storage.cipher import DataCipher
from bhandar_cli.storage.disk import Disk
from bhandar_cli.storage.record_kinds import decode_log_link, decode_op, decode_time_mark


class NoWriteTimes(ValueError):
    """`until` was given but the archive's writes carry no time marks (no wall clock was given)."""


@dataclass
class Split:
    """The archived writes of one node's snapshot, cut at `until`."""

    kept: list[bytes] = field(default_factory=list)  # operation payloads, oldest first
    kept_keys: list[tuple[bytes, bytes]] = field(default_factory=list)  # (engine key, value) of each
    discarded_keys: list[tuple[bytes, bytes]] = field(default_factory=list)
    last_kept: float | None = None  # wall time of the newest write kept
    first_discarded: float | None = None
    last_discarded: float | None = None
    problems: list[str] = field(default_factory=list)  # damage met in the archived WALs
    full: bool = False  # the archive filled up: writes after its last WAL were never archived
    # An earlier restore had ended the archive's timeline (the caller sets these: by the time the
    # archive is split this restore has ended it too): later writes were never archived for it.
    ended: bool = False
    ended_at: float | None = None  # the wall time of that restore, when the archive says


def split(disk: Disk, snapshot: str, until: float | None, cipher: DataCipher | None = None) -> Split:
    """Read the archived WALs of `snapshot` (opening encrypted ones with `cipher`: an archived WAL
    stays sealed under the key it was written with) and cut them at `until` (None: keep none)."""
    out = Split()
    info = archive.ArchiveInfo.load(disk, snapshot)
    out.full = bool(info and info.full)
    when: float | None = None
    for path in archive.archived_logs(disk, snapshot):
        parsed = wal.parse(disk.read(path), cipher)
        if parsed.problem or parsed.corrupt:
            out.problems.append(f"{path}: {parsed.problem or 'corrupt'} (the records there are not restored)")
        for payload in parsed.payloads:
            mark = decode_time_mark(payload)
            if mark is not None:
                when = mark
                continue
            if decode_log_link(payload) is not None:
                continue
            _, key, value = decode_op(payload)
            if until is not None and when is None:
                raise NoWriteTimes(f"{path} has writes with no time marks: restore to the snapshot itself")
            if until is not None and when is not None and when <= until:
                out.kept.append(payload)
                out.kept_keys.append((key, value))
                out.last_kept = when
            else:
                out.discarded_keys.append((key, value))
                if when is not None:
                    out.first_discarded = when if out.first_discarded is None else out.first_discarded
                    out.last_discarded = when
    return out
