"""The node's `Store` on the LSM engine: records, hints and metadata as keys and values.

Key layout (one engine per node, ordered so that a keyspace or the hints scan as one range):
  b"d" + len(keyspace) (2 bytes) + keyspace + key   -> policy and record   data
  b"h" + CBOR([target, keyspace, key])              -> created and record  hints
  b"m" + name                                       -> CBOR value          metadata

Values are in the versioned format of `store/record_format.py`, which also provides the
engine's merge operator: it applies the versioning core's own merge (siblings, lww or counter,
from the policy stored beside the record), so compaction and reads can never drop a sibling.
Reaping a tombstone is a hard delete. A record this build cannot read (a newer format) is
reported once and treated as absent, and stays on disk (see `record_format`). Corruption the
engine finds (storage/damage.py) is handed to the node by `take_damage`, naming the keyspaces whose
records the damaged keys held, so the node repairs those from their replicas.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import cbor2

from bhandar_cli.core.model import HintKey, Record, StoreDamage, Versioned
from bhandar_cli.storage import BackgroundJob, Corruption, EngineOptions, EngineStats, KeyInterval, LSMEngine
from bhandar_cli.storage.disk import Disk
from bhandar_cli.store.record_format import (
    RecordFormatError,
    decode_data,
    decode_hint,
    decode_meta,
    encode_data,
    encode_hint,
    encode_meta,
    merge_stored,
)

log = logging.getLogger(__name__)

DATA, HINT, META = b"d", b"h", b"m"


def data_key(keyspace: str, key: str) -> bytes:
    ks = keyspace.encode("utf-8")
    return DATA + len(ks).to_bytes(2, "big") + ks + key.encode("utf-8", "surrogatepass")


def key_name(raw: bytes) -> str:
    """An engine key as a person reads it: `kv/k187` for a record, `a hint` or `metadata NAME`."""
    if raw[:1] == DATA and len(raw) >= 3:
        size = int.from_bytes(raw[1:3], "big")
        keyspace = raw[3 : 3 + size].decode("utf-8", "replace")
        return f"{keyspace}/{raw[3 + size :].decode('utf-8', 'replace')}"
    if raw[:1] == HINT:
        return "a hint"
    if raw[:1] == META:
        return f"metadata {raw[1:].decode('utf-8', 'replace')}"
    return repr(raw)


def _prefix_end(prefix: bytes) -> bytes:
    """The smallest key after every key that starts with `prefix`."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else b"\xff" * (len(prefix) + 1)


class RecordStore:
    """`core.model.store.Store` over an `LSMEngine`. Not thread-safe (one node, one task)."""

    def __init__(self, disk: Disk, directory: str, options: EngineOptions | None = None) -> None:
        self._open_args = (disk, directory, options)
        self.engine = LSMEngine(disk, directory, options, merge=merge_stored)
        self.unreadable: dict[bytes, RecordFormatError] = {}
        """Records met that this build cannot read (treated as absent), by engine key."""
        self._policies: dict[str, str] = {}
        spaces = self.get_meta("keyspaces") or []
        self._policies = {str(k[0]): str(k[1]) for k in spaces}

    def reopen(self) -> None:
        """Close and open again from disk, as a restarted process would (recovery runs)."""
        self.engine.close()
        disk, directory, options = self._open_args
        self.engine = LSMEngine(disk, directory, options, merge=merge_stored)

    # --- data --------------------------------------------------------------------------------

    def get(self, keyspace: str, key: str) -> Record | None:
        raw_key = data_key(keyspace, key)
        raw = self.engine.get(raw_key)
        if raw is None:
            return None
        try:
            return decode_data(raw)[1]
        except RecordFormatError as exc:
            self._unreadable(raw_key, exc.at(f"record {keyspace}/{key}"))
            return None

    def put(self, keyspace: str, key: str, record: Record) -> None:
        policy = self._policies.get(keyspace, "siblings" if isinstance(record, Versioned) else "counter")
        self.engine.put(data_key(keyspace, key), encode_data(policy, record))

    def remove(self, keyspace: str, key: str) -> None:
        raw_key = data_key(keyspace, key)
        self.engine.delete(raw_key)
        self.unreadable.pop(raw_key, None)

    def items(self, keyspace: str) -> Iterator[tuple[str, Record]]:
        prefix = data_key(keyspace, "")
        for raw_key, raw in self.engine.scan(prefix, _prefix_end(prefix)):
            key = raw_key[len(prefix) :].decode("utf-8", "surrogatepass")
            try:
                record = decode_data(raw)[1]
            except RecordFormatError as exc:
                self._unreadable(raw_key, exc.at(f"record {keyspace}/{key}"))
                continue
            yield key, record

    def keys(self, keyspace: str) -> Iterator[str]:
        """The keyspace's keys, without decoding their records."""
        prefix = data_key(keyspace, "")
        skip = len(prefix)
        for raw_key in self.engine.scan_keys(prefix, _prefix_end(prefix)):
            yield raw_key[skip:].decode("utf-8", "surrogatepass")

    def keyspaces(self) -> list[str]:
        found: list[str] = []
        start = DATA
        while True:
            first = next(self.engine.scan_keys(start, _prefix_end(DATA)), None)
            if first is None:
                return found
            size = int.from_bytes(first[1:3], "big")
            found.append(first[3 : 3 + size].decode("utf-8"))
            start = _prefix_end(first[: 3 + size])

    def count(self) -> int:
        return sum(1 for _ in self.engine.scan_keys(DATA, _prefix_end(DATA)))

    # --- metadata ----------------------------------------------------------------------------

    def get_meta(self, name: str) -> Any:
        raw = self.engine.get(META + name.encode("utf-8"))
        return None if raw is None else decode_meta(raw, f"metadata {name!r}")

    def put_meta(self, name: str, value: Any) -> None:
        if name == "keyspaces":
            self._policies = {str(k[0]): str(k[1]) for k in value}
        self.engine.put(META + name.encode("utf-8"), encode_meta(value))

    def meta_names(self, prefix: str) -> Iterator[str]:
        start = META + prefix.encode("utf-8")
        for raw_key, _ in self.engine.scan(start, _prefix_end(start)):
            yield raw_key[len(META) :].decode("utf-8")

    def remove_meta(self, name: str) -> None:
        self.engine.delete(META + name.encode("utf-8"))

    # --- hints -------------------------------------------------------------------------------

    def hints(self) -> Iterator[tuple[HintKey, Record, float]]:
        for raw_key, raw in self.engine.scan(HINT, _prefix_end(HINT)):
            target, keyspace, key = cbor2.loads(raw_key[1:])
            try:
                created, record = decode_hint(raw)
            except RecordFormatError as exc:
                self._unreadable(raw_key, exc.at(f"hint for {target} of {keyspace}/{key}"))
                continue
            yield (target, keyspace, key), record, created

    def put_hint(self, hint: HintKey, record: Record, created: float) -> None:
        # Hints are replaced whole (the queue merges before storing), so they carry no policy.
        self.engine.put(HINT + cbor2.dumps(list(hint)), encode_hint(created, record))

    def remove_hint(self, hint: HintKey) -> None:
        raw_key = HINT + cbor2.dumps(list(hint))
        self.engine.delete(raw_key)
        self.unreadable.pop(raw_key, None)

    # --- durability and housekeeping ---------------------------------------------------------

    def sync(self) -> None:
        self.engine.sync()

    def begin_sync(self) -> Callable[[], None] | None:
        return self.engine.begin_sync()

    def background_job(self) -> BackgroundJob | None:
        return self.engine.background_job()

    def flush(self) -> str | None:
        return self.engine.flush()

    def full_compaction_job(self) -> BackgroundJob | None:
        """A forced full compaction as a background job (run it in a worker, finish it here)."""
        return self.engine.full_compaction_job()

    def compact(self) -> int:
        return len(self.engine.compact(full=True))

    def snapshot(self, directory: str, copy: bool = False) -> list[str]:
        return self.engine.snapshot(directory, copy)

    def stats(self) -> EngineStats:
        return self.engine.stats()

    def disk_figures(self) -> dict[str, int]:
        s = self.engine.stats()
        return {
            "disk_bytes": s.disk_bytes,
            "sstables": s.sstables,
            "compaction_backlog": s.compaction_backlog,
            "wal_bytes": s.wal_bytes,
            "memtable_bytes": s.memtable_bytes,
            "archives": s.archives,  # snapshots it keeps its WALs for (point-in-time restore)
            "archived_wal_bytes": s.archived_wal_bytes,
        }

    def take_damage(self) -> list[StoreDamage]:
        return [self._damage(c) for c in self.engine.take_corruptions()]

    def _damage(self, c: Corruption) -> StoreDamage:
        metadata = c.lost is not None and c.lost.overlaps(META, _prefix_end(META))
        return StoreDamage(
            kind=c.kind,
            file=c.file,
            offset=c.offset,
            message=c.describe(key_name),
            keyspaces=self._keyspaces_in(c.lost),
            metadata=metadata,
        )

    def _keyspaces_in(self, lost: KeyInterval | None) -> tuple[str, ...] | None:
        """The keyspaces with records among the keys lost; None when they may be any."""
        if lost is None:
            return ()
        if lost == KeyInterval():
            return None
        names = set(self._policies)
        for key in (lost.after, lost.through):  # the keyspaces of the interval's ends, surely
            if key is not None and key[:1] == DATA and len(key) >= 3:
                size = int.from_bytes(key[1:3], "big")
                names.add(key[3 : 3 + size].decode("utf-8", "replace"))
        return tuple(sorted(n for n in names if lost.overlaps(data_key(n, ""), _prefix_end(data_key(n, "")))))

    def close(self) -> None:
        self.engine.close()

    def _unreadable(self, raw_key: bytes, error: RecordFormatError) -> None:
        """A record this build cannot read counts as absent; say so once, not on every read."""
        if raw_key not in self.unreadable:
            log.warning("%s; it is treated as absent and stays on disk", error)
        self.unreadable[raw_key] = error
