"""Size-tiered compaction: which tables to merge, and the k-way merge of sorted runs.

Tables are kept in age order (oldest first) and a compaction only ever merges a *contiguous*
run of them, replacing it in place with one table (as RocksDB's universal compaction does). That
keeps "newer shadows older" true without a sequence number per record, and lets a non-commutative
merge be applied in age order.

Tiers (after Cassandra's SizeTieredCompactionStrategy): walking from oldest to newest, a table
joins the current tier when its size is within [bucket_low, bucket_high] × the tier's average, or
when both are below `small_table_bytes` (tiny tables are all alike). A tier with at least
`min_tables` tables is due; the due tier with the smallest tables is merged first (cheapest,
and small tables are the most numerous), at most `max_tables` at once.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter

from bhandar_cli.storage.record_kinds import DELETE, MERGE, VALUE, Merge, resolve

Entry = tuple[bytes, int, bytes | None]  # (key, kind, value)
_KEY = itemgetter(0)


@dataclass(frozen=True)
class TierPolicy:
    min_tables: int = 4
    max_tables: int = 32
    bucket_low: float = 0.5
    bucket_high: float = 1.5
    small_table_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        if not 2 <= self.min_tables <= self.max_tables:
            raise ValueError(f"need 2 ≤ min_tables ≤ max_tables, got {self.min_tables}, {self.max_tables}")
        if not 0 < self.bucket_low <= 1 <= self.bucket_high:
            raise ValueError(
                f"need 0 < bucket_low ≤ 1 ≤ bucket_high, got {self.bucket_low}, {self.bucket_high}"
            )


def tiers(sizes: Sequence[int], policy: TierPolicy) -> list[range]:
    """Split tables (sizes, oldest first) into contiguous tiers of similar size."""
    out: list[range] = []
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if i > start:
            avg = total / (i - start)
            small = size < policy.small_table_bytes and avg < policy.small_table_bytes
            if not (small or policy.bucket_low * avg <= size <= policy.bucket_high * avg):
                out.append(range(start, i))
                start, total = i, 0
        total += size
    if sizes:
        out.append(range(start, len(sizes)))
    return out


def pick(sizes: Sequence[int], policy: TierPolicy) -> range | None:
    """The tables to compact next (a contiguous range), or None when no tier is due."""
    due = [t for t in tiers(sizes, policy) if len(t) >= policy.min_tables]
    if not due:
        return None
    best = min(due, key=lambda t: (sum(sizes[i] for i in t) / len(t), t.start))
    return range(best.start, min(best.stop, best.start + policy.max_tables))


def backlog(sizes: Sequence[int], policy: TierPolicy) -> int:
    """Tables waiting in due tiers (the compaction-backlog metric)."""
    return sum(len(t) for t in tiers(sizes, policy) if len(t) >= policy.min_tables)


def merge_runs(
    runs: Sequence[Iterable[Entry]], merge: Merge | None, *, drop_deletes: bool
) -> Iterator[Entry]:
    """K-way merge of sorted runs given newest first; one resolved entry per key.

    `drop_deletes` is only correct when nothing older than the oldest run can hold these keys
    (the compaction includes the oldest table, or a scan covers every run): then a deletion
    marker has nothing left to shadow and a MERGE result is final.
    """
    # heapq.merge is stable: on equal keys, the earlier (newer) run comes first.
    merged: Iterable[Entry] = heapq.merge(*runs, key=_KEY) if len(runs) > 1 else (runs[0] if runs else ())
    for key, group in groupby(merged, key=_KEY):
        records = [(k, v) for _, k, v in group]
        kind, value = records[0] if len(records) == 1 else resolve(records, merge)
        if drop_deletes:
            if kind == DELETE:
                continue
            if kind == MERGE:
                kind = VALUE
        yield key, kind, value


def live_keys(runs: Sequence[Iterable[Entry]]) -> Iterator[bytes]:
    """The keys of a k-way merge of sorted runs (newest first) whose newest record is not a
    deletion, which is exactly the keys `merge_runs(..., drop_deletes=True)` yields: a key scan
    then never reads its records' values, let alone merges them."""
    merged: Iterable[Entry] = heapq.merge(*runs, key=_KEY) if len(runs) > 1 else (runs[0] if runs else ())
    last = None
    for key, kind, _ in merged:
        if key != last:  # the newest record of the key (heapq.merge is stable): it decides
            last = key
            if kind != DELETE:
                yield key
