"""The storage interface a node uses, and the in-memory implementation.

A node keeps three things durable: records (keyspace, key) -> Record, hints (target, keyspace, key)
-> (Record, created), and small metadata (keyspace definitions, epochs). `sync()` is the group
commit point: the node's driver calls it before sending anything marked durable. The in-memory
store is durable for the life of the process, so a `kill`ed in-process node keeps its data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from bhandar_cli.core.model.records import Record

HintKey = tuple[str, str, str]  # (target node, keyspace, key)


@dataclass(frozen=True, kw_only=True)
class StoreDamage:
    """Corruption the store found on its disk: what it was, where, and what it may have cost."""

    kind: str  # sstable_block, sstable_index, sstable_bloom, sstable_footer, sstable, wal_record
    file: str
    offset: int
    message: str  # says the file, the offset and the keys lost
    keyspaces: tuple[str, ...] | None  # the keyspaces that may have lost records; None: any
    # Whether the node's own metadata may have lost records too (its dot counters among them).
    metadata: bool = False


class StoreJob(Protocol):
    """A flush or compaction a store has due (the LSM engine's background job, storage/jobs.py,
    fits this): built by `run` in a worker thread, installed by `finish` on the node's own. The
    core only hands it to the driver, which runs it."""

    kind: str  # "flush" | "compaction"

    @property
    def error(self) -> Exception | None:
        """What `run` met, if anything (read after `run`)."""
        ...

    def run(self) -> None: ...
    def finish(self) -> object:
        """Install the output; raises what `run` met if it was an I/O failure."""
        ...


class Store(Protocol):
    def get(self, keyspace: str, key: str) -> Record | None: ...
    def put(self, keyspace: str, key: str, record: Record) -> None: ...
    def remove(self, keyspace: str, key: str) -> None: ...
    def items(self, keyspace: str) -> Iterator[tuple[str, Record]]: ...
    def keys(self, keyspace: str) -> Iterator[str]: ...
    def keyspaces(self) -> list[str]: ...
    def count(self) -> int: ...
    def get_meta(self, name: str) -> Any: ...
    def put_meta(self, name: str, value: Any) -> None: ...
    def meta_names(self, prefix: str) -> Iterator[str]: ...
    def remove_meta(self, name: str) -> None: ...
    def hints(self) -> Iterator[tuple[HintKey, Record, float]]: ...
    def put_hint(self, hint: HintKey, record: Record, created: float) -> None: ...
    def remove_hint(self, hint: HintKey) -> None: ...
    def sync(self) -> None: ...
    def begin_sync(self) -> Callable[[], None] | None:
        """`sync` in two halves: this on the event loop, the function it returns in a worker."""
        ...

    def background_job(self) -> StoreJob | None:
        """A flush or compaction due now (storage/jobs.py), to run in a worker and finish here."""
        ...

    def take_damage(self) -> list[StoreDamage]:
        """Corruption found since the last call (each reported once), for the node to repair."""
        ...

    def close(self) -> None:
        """Sync and release files; the store is not used again."""
        ...

    def reopen(self) -> None:
        """Close and open again, reading everything back from the disk, as a restarted process
        would (its WAL replayed). A store in memory has nothing to read back."""
        ...

    def disk_figures(self) -> dict[str, int]:
        """What the store holds on disk (`disk_bytes`, `sstables`, `compaction_backlog`,
        `wal_bytes`, `memtable_bytes`, `archives`, `archived_wal_bytes`); {} in memory."""
        ...


class MemoryStore:
    """Dictionaries; survives a simulated crash of its node because the runtime keeps the object."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, Record]] = {}
        self._hints: dict[HintKey, tuple[Record, float]] = {}
        self._meta: dict[str, Any] = {}
        self.syncs = 0

    def get(self, keyspace: str, key: str) -> Record | None:
        space = self._data.get(keyspace)
        return None if space is None else space.get(key)

    def put(self, keyspace: str, key: str, record: Record) -> None:
        space = self._data.get(keyspace)
        if space is None:
            space = self._data[keyspace] = {}
        space[key] = record

    def remove(self, keyspace: str, key: str) -> None:
        self._data.get(keyspace, {}).pop(key, None)

    def items(self, keyspace: str) -> Iterator[tuple[str, Record]]:
        yield from sorted(self._data.get(keyspace, {}).items())

    def keys(self, keyspace: str) -> Iterator[str]:
        yield from sorted(self._data.get(keyspace, {}))

    def keyspaces(self) -> list[str]:
        return sorted(self._data)

    def take_damage(self) -> list[StoreDamage]:
        return []  # memory is not a disk: nothing to find

    def count(self) -> int:
        return sum(len(space) for space in self._data.values())

    def get_meta(self, name: str) -> Any:
        return self._meta.get(name)

    def put_meta(self, name: str, value: Any) -> None:
        self._meta[name] = value

    def meta_names(self, prefix: str) -> Iterator[str]:
        yield from sorted(n for n in self._meta if n.startswith(prefix))

    def remove_meta(self, name: str) -> None:
        self._meta.pop(name, None)

    def hints(self) -> Iterator[tuple[HintKey, Record, float]]:
        for hint, (record, created) in list(self._hints.items()):
            yield hint, record, created

    def put_hint(self, hint: HintKey, record: Record, created: float) -> None:
        self._hints[hint] = (record, created)

    def remove_hint(self, hint: HintKey) -> None:
        self._hints.pop(hint, None)

    def sync(self) -> None:
        self.syncs += 1

    def begin_sync(self) -> Callable[[], None] | None:
        self.syncs += 1
        return None  # nothing to make durable beyond the process's memory

    def background_job(self) -> StoreJob | None:
        return None  # no files, no jobs

    def reopen(self) -> None:
        pass  # the records are the process's memory: a restart keeps them (a kill in a test)

    def disk_figures(self) -> dict[str, int]:
        return {}

    def close(self) -> None:
        pass  # nothing to release
