"""Record kinds, the WAL payloads, and the one rule that resolves a key across runs.

A key may appear in the memtable and in several SSTables ("runs"). Each appearance is a record of
one of three kinds:

- `VALUE`: a value that shadows everything older (a plain put when the engine has no merge).
- `MERGE`: a value to combine with older records through the engine's `merge(newer, older)`
  (a put when the engine has a merge function, like RocksDB's merge operands).
- `DELETE`: a deletion marker; it shadows everything older.

`resolve` folds the records of one key from newest to oldest. The same fold is used by `get`,
`scan` and compaction, so a compaction never changes what a read returns (given an associative
merge; it need not be commutative because runs are only ever merged in age order).

A WAL payload is one operation (`encode_op`), except the first record of a WAL started when a
memtable was sealed: a link naming the WAL before it and that WAL's final length
(`encode_log_link`). Both files hold unsynced bytes at that moment and a crash may keep the newer
one's while losing the older one's tail; the link lets recovery see that gap and stop there, so
what it replays is still a prefix of the writes (the acknowledged ones all lie before any gap).

While a snapshot archives the WALs (archive.py), a write is preceded by a time mark
(`encode_time_mark`: the wall-clock time, when it changed since the last mark), so that a
point-in-time restore knows when each write was made. Replay skips marks.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

DELETE = 0
VALUE = 1
MERGE = 2
KIND_NAMES = {DELETE: "delete", VALUE: "value", MERGE: "merge"}

Merge = Callable[[bytes, bytes], bytes]

# WAL payload of one operation: kind u8, key length u32, key, value (the rest of the payload).
_OP = struct.Struct("<BI")
# WAL payload linking to the previous WAL: LOG_LINK u8, its number u64, its final length u64.
LOG_LINK = 0xFF
_LINK = struct.Struct("<BQQ")
# WAL payload saying when the writes after it were made: TIME_MARK u8, wall-clock seconds f64.
TIME_MARK = 0xFE
_MARK = struct.Struct("<Bd")


def encode_op(kind: int, key: bytes, value: bytes) -> bytes:
    return _OP.pack(kind, len(key)) + key + value


def decode_op(payload: bytes) -> tuple[int, bytes, bytes]:
    """Inverse of `encode_op`; raises ValueError on a payload no version of us wrote."""
    if len(payload) < _OP.size:
        raise ValueError(f"operation record of {len(payload)} bytes is shorter than its header")
    kind, klen = _OP.unpack_from(payload)
    end = _OP.size + klen
    if kind not in KIND_NAMES or end > len(payload):
        raise ValueError(f"operation record has kind {kind} and key length {klen} of {len(payload)} bytes")
    return kind, payload[_OP.size : end], payload[end:]


def encode_log_link(previous: int, length: int) -> bytes:
    return _LINK.pack(LOG_LINK, previous, length)


def decode_log_link(payload: bytes) -> tuple[int, int] | None:
    """(previous WAL number, its final length) if `payload` is a link, else None."""
    if len(payload) != _LINK.size or payload[0] != LOG_LINK:
        return None
    _, previous, length = _LINK.unpack(payload)
    return previous, length


def encode_time_mark(when: float) -> bytes:
    return _MARK.pack(TIME_MARK, when)


def decode_time_mark(payload: bytes) -> float | None:
    """The wall-clock time of a time mark, or None if `payload` is not one."""
    if len(payload) != _MARK.size or payload[0] != TIME_MARK:
        return None
    return float(_MARK.unpack(payload)[1])


def resolve(records: Iterable[tuple[int, bytes | None]], merge: Merge | None) -> tuple[int, bytes | None]:
    """Fold one key's records, newest first, into a single (kind, value).

    The result is `(DELETE, None)` when a deletion marker wins, `(VALUE, v)` when the fold hit a
    record that shadows everything older, and `(MERGE, v)` when older runs not in `records` could
    still contribute (a compaction that includes the oldest run may turn that into VALUE).
    """
    acc: bytes | None = None
    for kind, value in records:
        if kind == DELETE:
            return (DELETE, None) if acc is None else (VALUE, acc)
        assert value is not None, "a value record without a value is a bug"
        if acc is None:
            acc = value
        elif merge is None:  # newest wins; only reachable for MERGE records written with a merge
            return VALUE, acc
        else:
            acc = merge(acc, value)
        if kind == VALUE:
            return VALUE, acc
    if acc is None:
        raise ValueError("resolve() needs at least one record")
    return MERGE, acc
