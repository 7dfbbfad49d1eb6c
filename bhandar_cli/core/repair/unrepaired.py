"""The keyspaces whose copy on this node lost records and is not yet repaired from the others.

Storage damage (a corrupt block or WAL record, a table quarantined, a table the MANIFEST lists
that is gone) can cost a key its newest records: the node's own copy then reads as an older
version, or a deleted key's value comes back (its tombstone was in what was lost). Until
anti-entropy has compared every range of the keyspace with each other replica, this node's copy
there must answer no read: a coordinator here asks only the other replicas, and a replica read
from another coordinator gets no answer (the node counts as a replica that did not answer). Writes
are still taken: they merge into whatever the node holds.

The set is kept as store metadata (`unrepaired`), so a restart before the repair ends (when the
damage itself, a table already dropped from the MANIFEST, is no longer found) keeps refusing.
"""

from __future__ import annotations

from collections.abc import Iterable

from bhandar_cli.core.model import Store

META = "unrepaired"


class Unrepaired:
    def __init__(self, store: Store) -> None:
        self._store = store
        saved = store.get_meta(META) or []
        self.keyspaces: set[str] = {str(name) for name in saved}

    def __contains__(self, keyspace: str) -> bool:
        return keyspace in self.keyspaces

    def add(self, keyspaces: Iterable[str]) -> None:
        self._save(self.keyspaces | set(keyspaces))

    def settle(self, pending: Iterable[str]) -> None:
        """Only the keyspaces in `pending` (comparisons queued or running) stay unrepaired."""
        self._save(self.keyspaces & set(pending))

    def _save(self, keyspaces: set[str]) -> None:
        if keyspaces != self.keyspaces:
            self.keyspaces = keyspaces
            self._store.put_meta(META, sorted(keyspaces))
