"""Reads across the LSM tree: the live memtable, the sealed memtables, then the tables, newest first.

A key's records are folded newest to oldest: a VALUE or a deletion ends the walk; MERGE operands
are combined with the engine's merge function (without one, the newest record wins). Scans merge
every source in key order (`compaction.merge_runs`) and drop deletions, as nothing older exists.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from bhandar_cli.storage import compaction
from bhandar_cli.storage.bloom import bloom_hash
from bhandar_cli.storage.memtable import Memtable, SealedMemtable
from bhandar_cli.storage.records import DELETE, VALUE, Merge
from bhandar_cli.storage.sstable import Table

Record = tuple[int, bytes | None]  # (kind, value)


def _fold(acc: bytes | None, record: Record, merge: Merge | None) -> tuple[bool, bytes | None]:
    """Fold one older record into the value so far: (final?, value)."""
    kind, value = record
    if kind == DELETE:
        return True, acc
    if acc is None:
        acc = value
    elif merge is None:  # MERGE records from a run with a merge function; newest wins
        return True, acc
    else:
        acc = merge(acc, value)  # type: ignore[arg-type]
    return kind == VALUE, acc


def lookup(
    key: bytes,
    newest: Record | None,
    sealed: Sequence[SealedMemtable],
    tables: Sequence[Table],
    merge: Merge | None,
) -> bytes | None:
    """Fold `key`'s records: `newest` (the live memtable's MERGE record, or None), then the sealed
    memtables (oldest first, read newest first), then `tables` (newest first)."""
    acc = None if newest is None else newest[1]
    for s in reversed(sealed):
        record = s.memtable.get(key)
        if record is not None:
            done, acc = _fold(acc, record, merge)
            if done:
                return acc
    h = bloom_hash(key)
    for table in tables:
        if not table.bloom.may_contain_hash(h):
            continue
        record = table.get(key)
        if record is not None:
            done, acc = _fold(acc, record, merge)
            if done:
                return acc
    return acc


def scan_runs(
    live: Memtable,
    sealed: Sequence[SealedMemtable],
    tables: Sequence[Table],
    start: bytes | None,
    end: bytes | None,
) -> list[Iterator[compaction.Entry]]:
    """The sorted runs of a scan, newest first. The live memtable's range is copied now (later
    writes change it); sealed memtables and tables never change, so they are read lazily."""
    return [
        iter(list(live.items(start, end))),
        *(s.memtable.items(start, end) for s in reversed(sealed)),
        *(t.entries(start, end) for t in tables),
    ]
