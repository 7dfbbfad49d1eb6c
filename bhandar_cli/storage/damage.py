"""Corruption found in the engine's files: what was damaged, where, and which keys it cost.

Every check that fails (an SSTable block, index, Bloom filter or footer; a WAL record; a table
that cannot be opened at all, or that the MANIFEST lists and is gone) becomes one `Corruption`
naming the file, the offset and length of the damage, and the engine keys whose records were lost
there (`lost`, a key interval; None when nothing was lost because the damaged part was rebuilt from
the data). The engine's `DamageLog`
collects them (owner thread only), drops repeats of the same damage (a bad block is met by every
read and compaction that touches it), counts them by kind and hands the new ones out once
(`take`): the caller (the node) logs them and repairs the lost keys from other replicas.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

KeyName = Callable[[bytes], str]  # an engine key as a person reads it (its store knows the layout)

SSTABLE_BLOCK = "sstable_block"
SSTABLE_INDEX = "sstable_index"
SSTABLE_BLOOM = "sstable_bloom"
SSTABLE_FOOTER = "sstable_footer"
SSTABLE = "sstable"  # a table that could not be opened at all: quarantined whole
SSTABLE_MISSING = "sstable_missing"  # a table the MANIFEST lists is not there (removed?)
WAL_RECORD = "wal_record"
KINDS = (SSTABLE_BLOCK, SSTABLE_INDEX, SSTABLE_BLOOM, SSTABLE_FOOTER, SSTABLE, SSTABLE_MISSING, WAL_RECORD)


@dataclass(frozen=True)
class KeyInterval:
    """Engine keys k with after < k ≤ through; None leaves that side open (every key: both None)."""

    after: bytes | None = None
    through: bytes | None = None

    def overlaps(self, lo: bytes, hi: bytes) -> bool:
        """Whether some key of [lo, hi) lies in the interval."""
        return (self.through is None or lo <= self.through) and (self.after is None or self.after < hi)

    def __str__(self) -> str:
        return self.show(repr)

    def show(self, name: KeyName) -> str:
        if self.after is None and self.through is None:
            return "any key"
        after = "the first key" if self.after is None else name(self.after)
        through = "the last key" if self.through is None else name(self.through)
        return f"keys after {after} through {through}"


@dataclass(frozen=True)
class Corruption:
    kind: str  # one of KINDS
    file: str  # the damaged file's path
    offset: int
    length: int
    what: str  # the check that failed
    lost: KeyInterval | None  # the keys whose records in this file were lost; None: none lost

    @property
    def message(self) -> str:
        return self.describe(repr)

    def describe(self, name: KeyName) -> str:
        """The damage in one sentence, the lost keys named by `name`."""
        cost = (
            "no record lost (rebuilt from the data)"
            if self.lost is None
            else f"lost the records of {self.lost.show(name)}"
        )
        where = f"{self.file} at offset {self.offset} ({self.length} bytes)"
        return f"{self.kind} corruption in {where}: {self.what}; {cost}"


class DamageLog:
    """The corruptions an engine found, each once; owner thread only."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._seen: set[tuple[str, str, int]] = set()
        self._new: list[Corruption] = []

    def add(self, corruption: Corruption) -> None:
        key = (corruption.kind, corruption.file, corruption.offset)
        if key in self._seen:
            return
        self._seen.add(key)
        self.counts[corruption.kind] += 1
        self._new.append(corruption)

    def take(self) -> list[Corruption]:
        """The corruptions found since the last `take`."""
        new, self._new = self._new, []
        return new
