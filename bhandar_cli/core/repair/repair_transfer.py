"""The transfer phase of a repair session: the differing keys fetched from the peer in bounded
batches, several in flight, each batch's merge pushed back as soon as it is made.

A fetch asks for at most FETCH_KEYS keys; the peer answers with at most about BATCH_BYTES of
records and names the keys it left for a later fetch (`RepairFetchReply.more`), and pushes are
cut at BATCH_BYTES too, so no message grows with the number of differences. Up to WINDOW fetches
are outstanding at once, and pushes overlap the fetches that follow them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from bhandar_cli.core.model import PNCounter, Record

FETCH_KEYS = 256
BATCH_BYTES = 256 * 1024
WINDOW = 4


def record_bytes(record: Record | None) -> int:
    """About how many bytes a record takes on the wire: its values plus a fixed cost per part."""
    if record is None:
        return 16
    if isinstance(record, PNCounter):
        return 64 * (1 + len(record.actors))
    return 32 + sum(64 + len(s.value or b"") + 16 * len(s.context) for s in record.siblings)


def fitting(records: Sequence[tuple[str, Record | None]]) -> int:
    """How many of `records`, from the first, fit in one message (at least one)."""
    total = 0
    for n, (_, record) in enumerate(records):
        total += record_bytes(record)
        if total > BATCH_BYTES and n > 0:
            return n
    return len(records)


@dataclass
class KeyTransfer:
    """Which differing keys are still to fetch, and which fetches and pushes are in flight (by
    number, so a duplicated or stale answer is recognised and ignored)."""

    waiting: deque[str] = field(default_factory=deque)
    fetches: set[int] = field(default_factory=set)
    pushes: set[int] = field(default_factory=set)
    sent: int = 0  # fetches and pushes numbered so far

    def next_fetches(self) -> list[tuple[int, tuple[str, ...]]]:
        """The (number, keys) batches to ask for now, counted as in flight."""
        out: list[tuple[int, tuple[str, ...]]] = []
        while self.waiting and len(self.fetches) < WINDOW:
            n = min(FETCH_KEYS, len(self.waiting))
            out.append((self._number(self.fetches), tuple(self.waiting.popleft() for _ in range(n))))
        return out

    def fetched(self, batch: int, left_out: tuple[str, ...]) -> bool:
        """Fetch `batch` was answered (False: not one in flight); the keys the peer left out go
        back in line."""
        if batch not in self.fetches:
            return False
        self.fetches.discard(batch)
        self.waiting.extend(left_out)
        return True

    def push(self) -> int:
        """The number of a push about to be sent."""
        return self._number(self.pushes)

    def pushed(self, batch: int) -> bool:
        """Push `batch` was acknowledged (False: not one in flight)."""
        if batch not in self.pushes:
            return False
        self.pushes.discard(batch)
        return True

    def _number(self, into: set[int]) -> int:
        self.sent += 1
        into.add(self.sent)
        return self.sent

    @property
    def done(self) -> bool:
        return not self.waiting and not self.fetches and not self.pushes
