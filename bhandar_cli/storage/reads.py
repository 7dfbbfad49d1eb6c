"""Reads across the LSM tree: the live memtable, the sealed memtables, then the tables, newest first.

A key's records are folded newest to oldest: a VALUE or a deletion ends the walk; MERGE operands
are combined with the engine's merge function (without one, the newest record wins). Scans merge
every source in key order (`compaction.merge_runs`) and drop deletions, as nothing older exists.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from bhandar_cli.storage import compaction
from bhandar_cli.storage.bloom import bloom_hash, filter_hash
from bhandar_cli.storage.memtable import Memtable, SealedMemtable
from bhandar_cli.storage.record_kinds import DELETE, MERGE, VALUE, Merge
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
    if sealed:
        for s in reversed(sealed):
            record = s.memtable.get(key)
            if record is not None:
                done, acc = _fold(acc, record, merge)
                if done:
                    return acc
    # Each table's blocked filter (bloom.py) is checked inline: the key's hash and mask are made
    # once, for every table, and a table's check is one AND (a call per table cost as much).
    h = filter_hash(key)
    x = (h * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    high, low = x >> 52, (x >> 40) & 0xFFF
    mask = 0
    masks = classic = None
    for table in tables:
        f = table.filter
        if f is not None:
            blocks, n, table_masks = f
            if table_masks is not masks:  # tables written with other options set other bits
                masks = table_masks
                mask = masks[0][high] | masks[1][low]
            if blocks[h % n] & mask != mask:
                continue
        else:  # a table of format 1, or with a damaged filter
            if classic is None:
                classic = bloom_hash(key)
            if not table.may_contain_hash(classic):
                continue
        record = table.get(key)
        if record is not None:
            if acc is None and record[0] != MERGE:  # `_fold`'s answer, without its call
                return record[1]
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
