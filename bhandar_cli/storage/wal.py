"""The write-ahead log: framed records, fsync policies, and recovery that skips damage.

File format 2 (what this build writes; little-endian):

    file header: magic "BHNDRWAL" | version u32 (2) | crc32 of the 12 bytes before it u32
    record:      magic b"\\xb1\\xa9W\\x02" | length u32 | crc32 u32 | payload

The record CRC (zlib.crc32) covers the length field and the payload, so a damaged length is
caught too. The record magic is what makes resynchronisation cheap: after a bad record, recovery
looks for the next magic whose record checks (`bytes.find`, not a CRC at every offset). Format 1
(no file header; records `length u32 | crc32 u32 | payload`) is still read, as it always was: up
to its first bad record. A format-1 file is never appended to: the engine flushes it at open.
Files are named `NNNNNN.log`; the engine decides what a payload means.

Format 3 (an encrypting engine's, see cipher.py): the file header is `"BHNDRWAL" | version u32
(3) | file id (8 random bytes) | crc32 u32`, and each record is framed as in format 2 around a
sealed payload (`nonce | AES-GCM ciphertext | tag`) whose associated data is the file id and the
record's offset. Records stay one per append (a WAL append streams; no batch is held back), and
the framing's CRC keeps torn tails and resynchronisation exactly as in format 2; a record whose
CRC holds but whose tag fails (a deliberate change, or a record moved) is a corrupt stretch. Reading
a format-3 log needs the cipher (`DataKeyError` without it).

Fsync policies (`FsyncPolicy`):
- `always`: every `append` is fsynced before it returns (one fsync per write: slow, simplest).
- `batch` (default, group commit): `append` only buffers; `sync()` makes every record appended
  so far durable with one fsync. A caller acknowledges writes only after `sync()` returned.
  `begin_sync()` splits that in two: the owner thread takes the records to sync, a worker
  thread runs the fsync it returns (see engine.py).
- `none`: never fsync; `sync()` only hands the bytes to the OS. Writes survive a crash of the
  process but a power loss or kernel crash can lose any of them. For throwaway data only.

Recovery (`replay`) tells two kinds of damage apart by what follows it:
- a torn tail: bytes that do not form a valid record and are followed by no valid record. A
  crash mid-append leaves exactly that (normal, not corruption): the file is truncated there.
- corruption in the middle: a bad stretch followed by a valid record. Only the records in that
  stretch are lost; replay resumes at the next valid record and reports the stretch (offset,
  length). Records after it are replayed although one before them is missing: every data write
  merges a replicated record (order does not matter) and the later records are still applied in
  their order, so the result is as if only the lost writes never happened. Data records come
  back from the replicas (the node repairs at once); a lost metadata or hint write shows its
  previous value, as after a lost unsynced write.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from bhandar_cli.storage.cipher import FILE_ID_BYTES, WAL_RECORD, DataCipher
from bhandar_cli.storage.disk import AppendFile, Disk
from bhandar_cli.storage.storage_errors import DataKeyError, StorageError

FORMAT_VERSION = 2
FILE_MAGIC = b"BHNDRWAL"
_FILE_HEAD = struct.Struct("<8sI")
FILE_HEADER = _FILE_HEAD.pack(FILE_MAGIC, FORMAT_VERSION)
FILE_HEADER += zlib.crc32(FILE_HEADER).to_bytes(4, "little")
FILE_HEADER_SIZE = len(FILE_HEADER)  # 16
ENCRYPTED_VERSION = 3
_FILE_HEAD3 = struct.Struct("<8sI8sI")
FILE_HEADER3_SIZE = _FILE_HEAD3.size  # 24
RECORD_MAGIC = b"\xb1\xa9W\x02"
_HEADER = struct.Struct("<4sII")
HEADER_SIZE = _HEADER.size  # 12
_V1_HEADER = struct.Struct("<II")
MAX_RECORD = 1 << 30  # a length above this is damage, not a record (values are ≤ 1 MiB)


def encrypted_header(file_id: bytes) -> bytes:
    head = _FILE_HEAD3.pack(FILE_MAGIC, ENCRYPTED_VERSION, file_id, 0)[:-4]
    return head + zlib.crc32(head).to_bytes(4, "little")


def is_sealed(head: bytes) -> bool:
    """Whether a log whose first 12 bytes are `head` is an encrypting engine's (format 3), or
    holds nothing yet; a plain log (format 1 or 2) is not."""
    head3 = _FILE_HEAD3.pack(FILE_MAGIC, ENCRYPTED_VERSION, b"", 0)[:12]
    return head3.startswith(head[:12])


def _header3_file_id(data: bytes) -> bytes | None:
    """The file id of a format-3 header (None: not one, or too damaged to name its file)."""
    if len(data) < FILE_HEADER3_SIZE:
        return None
    magic, version, file_id, crc = _FILE_HEAD3.unpack_from(data)
    if magic != FILE_MAGIC or version != ENCRYPTED_VERSION:
        return None
    return file_id if zlib.crc32(data[: FILE_HEADER3_SIZE - 4]) == crc else None


class FsyncPolicy(StrEnum):
    ALWAYS = "always"
    BATCH = "batch"
    NONE = "none"


def frame(payload: bytes) -> bytes:
    """One framed record: magic, length, CRC of (length, payload), payload."""
    n = len(payload)
    if n > MAX_RECORD:
        raise ValueError(f"WAL record of {n} bytes exceeds the {MAX_RECORD}-byte limit")
    length = n.to_bytes(4, "little")
    return RECORD_MAGIC + length + zlib.crc32(payload, zlib.crc32(length)).to_bytes(4, "little") + payload


@dataclass(frozen=True)
class CorruptSpan:
    """A stretch of a log that held no valid record, followed by a valid one."""

    offset: int
    length: int


@dataclass(frozen=True)
class ParsedLog:
    payloads: list[bytes]
    end: int  # the end of the last valid record: what recovery keeps of the file
    problem: str  # "" (ends cleanly), "torn" (a tail cut there) or "corrupt" (format 1: cut there)
    corrupt: tuple[CorruptSpan, ...] = ()
    version: int = FORMAT_VERSION
    offsets: tuple[int, ...] = ()  # where each payload's record starts (format 2 and 3)


@dataclass(frozen=True)
class WALReport:
    """What recovery found in one log file."""

    name: str
    records: int  # records replayed
    bytes_replayed: int  # the end of the last valid record (the file's length after recovery)
    bytes_truncated: int
    problem: str  # "" (clean tail), "torn", "corrupt" (format 1), or "gap" (an older WAL lost its tail)
    corrupt: tuple[CorruptSpan, ...] = field(default=())  # stretches skipped in the middle
    version: int = FORMAT_VERSION

    @property
    def message(self) -> str:
        if self.problem == "gap":
            return (
                f"WAL {self.name}: dropped {self.bytes_truncated} bytes written after writes an "
                "older WAL lost (none of them was acknowledged)"
            )
        parts = [
            f"WAL {self.name}: skipped {s.length} corrupt bytes at offset {s.offset} "
            "(the records there are lost; replay resumed at the next valid record)"
            for s in self.corrupt
            if self.problem != "corrupt" or s.offset != self.bytes_replayed
        ]
        if self.problem:
            what = "a torn tail" if self.problem == "torn" else "a corrupt record and everything after it"
            parts.append(
                f"WAL {self.name}: truncated {what} of {self.bytes_truncated} bytes at offset "
                f"{self.bytes_replayed} after {self.records} records"
            )
        if not parts:
            return f"WAL {self.name}: replayed {self.records} records ({self.bytes_replayed} bytes), clean"
        return "; ".join(parts)


class WALVersionError(StorageError):
    """A log written by a newer build (its file header names a version this build cannot read)."""


def _record_at(data: bytes, pos: int) -> bytes | None:
    """The payload of the valid format-2 record at `pos`, or None."""
    if len(data) - pos < HEADER_SIZE:
        return None
    magic, n, crc = _HEADER.unpack_from(data, pos)
    start = pos + HEADER_SIZE
    if magic != RECORD_MAGIC or n > MAX_RECORD or start + n > len(data):
        return None
    payload = data[start : start + n]
    return payload if zlib.crc32(payload, zlib.crc32(data[pos + 4 : pos + 8])) == crc else None


def _next_record(data: bytes, pos: int) -> int | None:
    """The offset of the first valid record after `pos`, or None."""
    i = data.find(RECORD_MAGIC, pos + 1)
    while i != -1:
        if _record_at(data, i) is not None:
            return i
        i = data.find(RECORD_MAGIC, i + 1)
    return None


def parse(data: bytes, cipher: DataCipher | None = None) -> ParsedLog:
    """Split a log's bytes into payloads, skipping corrupt stretches and finding a torn tail;
    a format-3 log's payloads are opened with `cipher` (`DataKeyError` if it is None)."""
    head3 = _FILE_HEAD3.pack(FILE_MAGIC, ENCRYPTED_VERSION, b"", 0)[:12]
    if len(data) < FILE_HEADER3_SIZE and (head3.startswith(data) or data.startswith(head3)):
        # Empty, or a header never synced (no record was): an empty log of either format.
        mine = FORMAT_VERSION if cipher is None else ENCRYPTED_VERSION
        return ParsedLog([], 0, "", version=mine if len(data) < len(head3) else ENCRYPTED_VERSION)
    if data.startswith(head3):
        return _parse_v3(data, cipher)
    if len(data) < FILE_HEADER_SIZE and FILE_HEADER.startswith(data):
        return ParsedLog([], 0, "")  # a header never synced (no record was): an empty log
    if data.startswith(FILE_MAGIC) and len(data) >= FILE_HEADER_SIZE:
        _, version = _FILE_HEAD.unpack_from(data)
        if data[:FILE_HEADER_SIZE] == FILE_HEADER or version == FORMAT_VERSION:
            return _parse_v2(data, FILE_HEADER_SIZE)
        if zlib.crc32(data[:12]) == int.from_bytes(data[12:16], "little"):
            raise WALVersionError(
                f"WAL format version {version}, written by a newer Bhandar; this build reads 1, 2 and 3"
            )
        return _parse_v2(data, 0)  # a damaged header: resynchronise on the first record
    (first,) = struct.unpack_from("<I", data) if len(data) >= 4 else (0,)
    if first <= MAX_RECORD and not data.startswith(RECORD_MAGIC):
        return _parse_v1(data)
    return _parse_v2(data, 0)  # no file header and no format-1 length: the header is damaged


def _parse_v2(data: bytes, pos: int) -> ParsedLog:
    payloads: list[bytes] = []
    offsets: list[int] = []
    corrupt: list[CorruptSpan] = []
    size = len(data)
    if pos == 0:  # the file header is damaged: what precedes the first record is the damage
        nxt = _next_record(data, -1)
        if nxt is None:
            return ParsedLog([], 0, "torn", version=FORMAT_VERSION)
        corrupt.append(CorruptSpan(0, nxt))
        pos = nxt
    while pos < size:
        payload = _record_at(data, pos)
        if payload is None:
            nxt = _next_record(data, pos)
            if nxt is None:
                return ParsedLog(payloads, pos, "torn", tuple(corrupt), offsets=tuple(offsets))
            corrupt.append(CorruptSpan(pos, nxt - pos))
            pos = nxt
            continue
        payloads.append(payload)
        offsets.append(pos)
        pos += HEADER_SIZE + len(payload)
    return ParsedLog(payloads, pos, "", tuple(corrupt), offsets=tuple(offsets))


def _parse_v3(data: bytes, cipher: DataCipher | None) -> ParsedLog:
    """Format 3: format 2's framing, then each payload opened; one that fails is a corrupt stretch."""
    if cipher is None:
        raise DataKeyError("this WAL is encrypted (format 3) and no data key was given")
    file_id = _header3_file_id(data)
    framed = _parse_v2(data, FILE_HEADER3_SIZE if file_id is not None else 0)
    bad = list(framed.corrupt)
    payloads, offsets = [], []
    for at, sealed in zip(framed.offsets, framed.payloads, strict=True):
        try:
            if file_id is None:
                raise ValueError("the file header naming this log is damaged")
            payloads.append(cipher.open(sealed, WAL_RECORD, file_id, at))
            offsets.append(at)
        except ValueError:
            bad.append(CorruptSpan(at, HEADER_SIZE + len(sealed)))
    bad.sort(key=lambda s: s.offset)
    return ParsedLog(payloads, framed.end, framed.problem, tuple(bad), ENCRYPTED_VERSION, tuple(offsets))


def _parse_v1(data: bytes) -> ParsedLog:
    """Format 1: up to the first bad record (it has no magic to resynchronise on)."""
    payloads: list[bytes] = []
    pos, size = 0, len(data)
    crc32, unpack_from = zlib.crc32, _V1_HEADER.unpack_from
    while pos < size:
        if size - pos < _V1_HEADER.size:
            return ParsedLog(payloads, pos, "torn", version=1)
        n, crc = unpack_from(data, pos)
        start = pos + _V1_HEADER.size
        if n > MAX_RECORD:
            return ParsedLog(payloads, pos, "corrupt", (CorruptSpan(pos, size - pos),), 1)
        if start + n > size:
            return ParsedLog(payloads, pos, "torn", version=1)
        payload = data[start : start + n]
        if crc32(payload, crc32(data[pos : pos + 4])) != crc:
            if start + n == size:  # a complete last record with a bad CRC: a torn write
                return ParsedLog(payloads, pos, "torn", version=1)
            return ParsedLog(payloads, pos, "corrupt", (CorruptSpan(pos, size - pos),), 1)
        payloads.append(payload)
        pos = start + n
    return ParsedLog(payloads, pos, "", version=1)


def replay(
    disk: Disk, path: str, name: str, cipher: DataCipher | None = None
) -> tuple[list[bytes], WALReport]:
    """Read a log, truncate a torn tail (or, in format 1, everything from a bad record), and
    report what happened. Corrupt stretches in the middle stay in the file: the engine flushes
    the replayed records and deletes the log, so they are reported once."""
    data = disk.read(path)
    log = parse(data, cipher)
    if log.end < len(data):
        disk.truncate(path, log.end)
    truncated = len(data) - log.end if log.problem else 0  # not the bytes of a torn file header
    report = WALReport(name, len(log.payloads), log.end, truncated, log.problem, log.corrupt, log.version)
    return log.payloads, report


class WALWriter:
    """Appends records to one log file under a fsync policy; a new (empty) file gets the header."""

    def __init__(
        self,
        disk: Disk,
        path: str,
        policy: FsyncPolicy = FsyncPolicy.BATCH,
        cipher: DataCipher | None = None,
    ) -> None:
        self.path = path
        self.policy = FsyncPolicy(policy)
        self._file: AppendFile = disk.open_append(path)
        self._unsynced = 0  # records appended since the last begin_sync
        self.closed = False
        self._cipher, self._file_id = cipher, b""
        if self._file.size == 0:
            # Synced with the first record; a torn one reads as empty.
            if cipher is None:
                self._file.write(FILE_HEADER)
            else:
                self._file_id = cipher.new_file_id()
                self._file.write(encrypted_header(self._file_id))
        elif cipher is not None:  # recovery kept this log: go on under its file id
            self._file_id = _header3_file_id(disk.read(path, 0, FILE_HEADER3_SIZE)) or b""

    def append(self, payload: bytes) -> None:
        if self._cipher is not None:
            if len(self._file_id) != FILE_ID_BYTES:
                raise StorageError(f"WAL {self.path} is not an encrypted log: no sealed record goes there")
            payload = self._cipher.seal(payload, WAL_RECORD, self._file_id, self._file.size)
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
