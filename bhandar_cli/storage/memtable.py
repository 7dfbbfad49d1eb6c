"""The memtable: the newest writes, sorted in memory (`sortedcontainers.SortedDict`).

It holds at most one record per key: a new write is combined with the one already there (see
`records.resolve`), so the memtable behaves like the newest run of the LSM tree. Its size is
approximate (key + value bytes plus a fixed per-entry overhead) and decides when to flush.

A full memtable is *sealed* (`SealedMemtable`): nothing writes to it again, so the owner thread
reads it while a flush job's worker iterates it. Reads of a `SortedDict` (`get`, `irange`,
iteration) change nothing inside it, so the two need no lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sortedcontainers import SortedDict

from bhandar_cli.storage.record_kinds import DELETE, MERGE, VALUE, Merge
from bhandar_cli.storage.wal import WALWriter

ENTRY_OVERHEAD = 48  # rough cost of the tuple and dict slot, so tiny values still count


class Memtable:
    """Sorted key → (kind, value) with an approximate byte size."""

    __slots__ = ("approx_bytes", "data")

    def __init__(self) -> None:
        self.data: SortedDict = SortedDict()
        self.approx_bytes = 0

    def __len__(self) -> int:
        return len(self.data)

    def apply(self, kind: int, key: bytes, value: bytes, merge: Merge | None) -> None:
        """Record a write: VALUE or MERGE with a value, or DELETE (value ignored)."""
        data = self.data
        old = data.get(key)
        if kind == DELETE:
            entry: tuple[int, bytes | None] = (DELETE, None)
        elif kind == MERGE and old is not None and merge is not None:
            old_kind, old_value = old
            # Over a deletion the merged value must still shadow everything older: VALUE.
            entry = (VALUE, value) if old_kind == DELETE else (old_kind, merge(value, old_value))
        else:
            entry = (kind, value)
        if old is None:
            self.approx_bytes += len(key) + ENTRY_OVERHEAD
        elif old[1] is not None:
            self.approx_bytes -= len(old[1])
        if entry[1] is not None:
            self.approx_bytes += len(entry[1])
        data[key] = entry

    def get(self, key: bytes) -> tuple[int, bytes | None] | None:
        entry: tuple[int, bytes | None] | None = self.data.get(key)
        return entry

    def items(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, int, bytes | None]]:
        """(key, kind, value) for start ≤ key < end, in key order."""
        data = self.data
        if start is None and end is None:  # a flush: skip irange's bounds checks
            for key, (kind, value) in data.items():
                yield key, kind, value
            return
        for key in data.irange(start, end, inclusive=(True, False)):
            kind, value = data[key]
            yield key, kind, value


@dataclass(frozen=True)
class SealedMemtable:
    """A full memtable that no write changes any more, waiting for its flush, and its WAL.

    `logs` are the WAL numbers holding its writes (more than one after a recovery replayed
    several); they are replayed by a restart until its table is in the MANIFEST. `wal` is the
    last of them, kept open so a sync can still take its unsynced records; it is closed when
    the flush is installed.
    """

    memtable: Memtable
    logs: tuple[int, ...]
    wal: WALWriter


__all__ = ["DELETE", "MERGE", "VALUE", "Memtable", "SealedMemtable"]
