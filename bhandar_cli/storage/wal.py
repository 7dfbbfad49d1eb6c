"""The write-ahead log: framed records, fsync policies, and recovery that truncates a torn tail.

Record frame (little-endian): `length u32 | crc32 u32 | payload`, where the CRC (zlib.crc32)
covers the length field and the payload, so a damaged length is caught too. Files are named
`NNNNNN.log`; the engine decides what a payload means.

Fsync policies (`FsyncPolicy`):
- `always`: every `append` is fsynced before it returns (one fsync per write: slow, simplest).
- `batch` (default, group commit): `append` only buffers; `sync()` makes every record appended
  so far durable with one fsync. A caller acknowledges writes only after `sync()` returned.
  `begin_sync()` splits that in two: the owner thread takes the records to sync, a worker
  thread runs the fsync it returns (see engine.py).
- `none`: never fsync; `sync()` only hands the bytes to the OS. Writes survive a crash of the
  process but a power loss or kernel crash can lose any of them. For throwaway data only.

Recovery (`replay`) reads records until the first one that is incomplete ("torn": the crash hit
mid-append) or fails its CRC ("corrupt"), truncates the file there and says so in a `WALReport`.
Stopping at the first bad record keeps the log a prefix of what was written (point-in-time
recovery): skipping a bad record and replaying later ones could reorder history.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from bhandar_cli.storage.disk import AppendFile, Disk

_HEADER = struct.Struct("<II")
HEADER_SIZE = _HEADER.size
MAX_RECORD = 1 << 30  # a length above this is damage, not a record (values are ≤ 1 MiB)


class FsyncPolicy(StrEnum):
    ALWAYS = "always"
    BATCH = "batch"
    NONE = "none"


def frame(payload: bytes) -> bytes:
    """One framed record: length, CRC of (length, payload), payload."""
    n = len(payload)
    if n > MAX_RECORD:
        raise ValueError(f"WAL record of {n} bytes exceeds the {MAX_RECORD}-byte limit")
    length = n.to_bytes(4, "little")
    return length + zlib.crc32(payload, zlib.crc32(length)).to_bytes(4, "little") + payload


@dataclass(frozen=True)
class WALReport:
    """What recovery found in one log file."""

    name: str
    records: int  # records replayed
    bytes_replayed: int
    bytes_truncated: int
    problem: str  # "" (clean), "torn", "corrupt", or "gap" (dropped: an older WAL lost its tail)

    @property
    def message(self) -> str:
        if not self.problem:
            return f"WAL {self.name}: replayed {self.records} records ({self.bytes_replayed} bytes), clean"
        if self.problem == "gap":
            return (
                f"WAL {self.name}: dropped {self.bytes_truncated} bytes written after writes an "
                "older WAL lost (none of them was acknowledged)"
            )
        what = "a torn tail" if self.problem == "torn" else "a corrupt record and everything after it"
        return (
            f"WAL {self.name}: truncated {what} of {self.bytes_truncated} bytes after {self.records} records"
        )


def parse(data: bytes) -> tuple[list[bytes], int, str]:
    """Split a log's bytes into payloads; return (payloads, end of the last good record, problem)."""
    payloads: list[bytes] = []
    pos, size = 0, len(data)
    crc32, unpack_from = zlib.crc32, _HEADER.unpack_from
    while pos < size:
        if size - pos < HEADER_SIZE:
            return payloads, pos, "torn"
        n, crc = unpack_from(data, pos)
        start = pos + HEADER_SIZE
        if n > MAX_RECORD:
            # A length this large is garbage; if it fits in the file it is corruption, else torn.
            return payloads, pos, "corrupt"
        if start + n > size:
            return payloads, pos, "torn"
        payload = data[start : start + n]
        if crc32(payload, crc32(data[pos : pos + 4])) != crc:
            # A complete record with a bad CRC at the very end is the typical torn write whose
            # length landed but whose payload did not; earlier in the file it is real damage.
            return payloads, pos, "torn" if start + n == size else "corrupt"
        payloads.append(payload)
        pos = start + n
    return payloads, pos, ""


def replay(disk: Disk, path: str, name: str) -> tuple[list[bytes], WALReport]:
    """Read a log, truncate it after its last good record, and report what happened."""
    data = disk.read(path)
    payloads, good, problem = parse(data)
    if good < len(data):
        disk.truncate(path, good)
    report = WALReport(name, len(payloads), good, len(data) - good, problem)
    return payloads, report


class WALWriter:
    """Appends records to one log file under a fsync policy."""

    def __init__(self, disk: Disk, path: str, policy: FsyncPolicy = FsyncPolicy.BATCH) -> None:
        self.path = path
        self.policy = FsyncPolicy(policy)
        self._file: AppendFile = disk.open_append(path)
        self._unsynced = 0  # records appended since the last begin_sync
        self.closed = False

    def append(self, payload: bytes) -> None:
        self._file.write(frame(payload))
        if self.policy is FsyncPolicy.ALWAYS:
            self._file.sync()
        else:
            self._unsynced += 1

    def begin_sync(self) -> Callable[[], None] | None:
        """Take every record appended so far into one fsync: returns the function that makes them
        durable (any thread may call it, once, even after this writer is closed), or None if
        there is nothing to fsync. Under `none` the records are only handed to the OS, here."""
        if not self._unsynced:
            return None
        self._unsynced = 0
        return self.resync()

    def resync(self) -> Callable[[], None] | None:
        """A new fsync of everything appended so far, for records an earlier `begin_sync` took
        whose fsync may not have run yet; None under `none` (the bytes only go to the OS)."""
        if self.policy is FsyncPolicy.NONE:
            self._file.flush()
            return None
        return self._file.sync_later()

    def sync(self) -> None:
        """The group-commit point: every record appended so far is durable when this returns
        (under `none`, it is only handed to the OS)."""
        fsync = self.begin_sync()
        if fsync is not None:
            fsync()

    @property
    def size(self) -> int:
        return self._file.size

    def close(self) -> None:
        self.closed = True
        self._file.close()
