"""The store every role of a node writes records through: it keeps the node's hash index
(`hash_index`) in step with every record put and removed, whichever role wrote it (replica and
coordinator writes, read repair, hints, streams, anti-entropy, reaping, ownership handoff).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from bhandar_cli.core.model import HintKey, Record, Store, StoreDamage, StoreJob
from bhandar_cli.core.repair.hash_index import HashIndex


class IndexedStore:
    """A `Store` that tells `index` of every record write and passes everything else through."""

    def __init__(self, store: Store, index: HashIndex) -> None:
        self._store = store
        self.index = index

    def put(self, keyspace: str, key: str, record: Record) -> None:
        self._store.put(keyspace, key, record)
        self.index.stored(keyspace, key, record)

    def remove(self, keyspace: str, key: str) -> None:
        self._store.remove(keyspace, key)
        self.index.removed(keyspace, key)

    def get(self, keyspace: str, key: str) -> Record | None:
        return self._store.get(keyspace, key)

    def items(self, keyspace: str) -> Iterator[tuple[str, Record]]:
        return self._store.items(keyspace)

    def keys(self, keyspace: str) -> Iterator[str]:
        return self._store.keys(keyspace)

    def keyspaces(self) -> list[str]:
        return self._store.keyspaces()

    def count(self) -> int:
        return self._store.count()

    def get_meta(self, name: str) -> Any:
        return self._store.get_meta(name)

    def put_meta(self, name: str, value: Any) -> None:
        self._store.put_meta(name, value)

    def meta_names(self, prefix: str) -> Iterator[str]:
        return self._store.meta_names(prefix)

    def remove_meta(self, name: str) -> None:
        self._store.remove_meta(name)

    def hints(self) -> Iterator[tuple[HintKey, Record, float]]:
        return self._store.hints()

    def put_hint(self, hint: HintKey, record: Record, created: float) -> None:
        self._store.put_hint(hint, record, created)

    def remove_hint(self, hint: HintKey) -> None:
        self._store.remove_hint(hint)

    def sync(self) -> None:
        self._store.sync()

    def begin_sync(self) -> Callable[[], None] | None:
        return self._store.begin_sync()

    def background_job(self) -> StoreJob | None:
        return self._store.background_job()

    def take_damage(self) -> list[StoreDamage]:
        return self._store.take_damage()

    def reopen(self) -> None:
        self._store.reopen()

    def disk_figures(self) -> dict[str, int]:
        return self._store.disk_figures()

    def close(self) -> None:
        self._store.close()
