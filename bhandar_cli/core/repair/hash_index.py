"""A replica's hash indexes (`token_hashes`), one per keyspace: built from the store once, on first
use, then kept up to date by every record write (`indexed_store`). Anti-entropy and the views read
range trees and range hashes from here instead of scanning the store.
"""

from __future__ import annotations

from collections.abc import Iterable

from bhandar_cli.core.model import Record, Store, Versioned, digest
from bhandar_cli.core.repair.reaping import is_tombstone
from bhandar_cli.core.repair.token_hashes import TokenHashes

STAGED_BYTES = 64 << 10  # a record holding more value bytes than this is hashed at once


class HashIndex:
    """Every keyspace's `TokenHashes`. A keyspace's index is built by one scan of the store the
    first time it is asked for; writes to a keyspace not built yet cost nothing (the scan will
    see them)."""

    def __init__(self, store: Store) -> None:
        self._store = store  # the underlying store: reading it must not write through the index
        self._spaces: dict[str, TokenHashes] = {}

    def space(self, keyspace: str) -> TokenHashes:
        """The keyspace's index, built from the store if this is the first use."""
        space = self._spaces.get(keyspace)
        if space is None:
            space = self._spaces[keyspace] = TokenHashes(keyspace, describe)
            for key, record in self._store.items(keyspace):
                space.put(key, digest(record), is_tombstone(record))
        return space

    def stored(self, keyspace: str, key: str, record: Record) -> None:
        """The store now holds `record` for the key (hashed when the index is next read, unless
        it is large: a staged record is held in memory until then)."""
        space = self._spaces.get(keyspace)
        if space is None:
            return
        if _small(record):
            space.stage(key, record)
        else:
            space.put(key, digest(record), is_tombstone(record))

    def removed(self, keyspace: str, key: str) -> None:
        """The store no longer holds the key."""
        space = self._spaces.get(keyspace)
        if space is not None:
            space.remove(key)

    def forget(self, keyspaces: Iterable[str] | None) -> None:
        """The store lost records behind our back (disk damage): rebuild these keyspaces' indexes
        (None: all) from what it holds now, when next used."""
        if keyspaces is None:
            self._spaces.clear()
            return
        for keyspace in keyspaces:
            self._spaces.pop(keyspace, None)


def describe(record: Record) -> tuple[bytes, bool]:
    """What the index keeps of a record: its digest, and whether it is a tombstone."""
    return digest(record), is_tombstone(record)


def _small(record: Record) -> bool:
    """Small enough to be held until its digest is due (a bound on what staging keeps alive)."""
    if isinstance(record, Versioned):
        return sum(len(s.value) for s in record.siblings if s.value is not None) <= STAGED_BYTES
    return True  # a counter: at most a thousand request ids per actor
