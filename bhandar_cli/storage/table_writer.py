"""`TableWriter`: streams sorted records into a new SSTable file (the layout is sstable.py's)."""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

from bhandar_cli.storage.blocks import DEFAULT_BLOCK_BYTES, encode_block
from bhandar_cli.storage.bloom import DEFAULT_BITS_PER_KEY, DEFAULT_HASHES, BlockedBloom, filter_hash
from bhandar_cli.storage.cipher import TABLE_BLOCK, TABLE_BLOOM, TABLE_INDEX, DataCipher, FileSeal
from bhandar_cli.storage.disk import AppendFile, Disk

MAGIC = b"BHNDRSST"
FORMAT_VERSION, ENCRYPTED_VERSION = 2, 3
_FOOTER = struct.Struct("<8sIQIIQIIQI8sI")
FOOTER_SIZE = _FOOTER.size  # 64
_U32 = struct.Struct("<I")


@dataclass(frozen=True)
class TableInfo:
    path: str
    size: int
    records: int
    blocks: int


class TableWriter:
    """Streams sorted, unique keys into a new table file; `finish()` makes it durable."""

    def __init__(
        self,
        disk: Disk,
        path: str,
        *,
        block_bytes: int = DEFAULT_BLOCK_BYTES,
        bits_per_key: int = DEFAULT_BITS_PER_KEY,
        hashes: int = DEFAULT_HASHES,
        cipher: DataCipher | None = None,
    ) -> None:
        if disk.exists(path):
            raise FileExistsError(f"refusing to overwrite table {path} (a file-number bug)")
        self.path, self.cipher, self._seal = path, cipher, FileSeal.new_file(cipher)
        self._file: AppendFile = disk.open_append(path)
        self._block_bytes = block_bytes
        self._bits_per_key, self._hashes = bits_per_key, hashes
        self._keys: list[bytes] = []
        self._kinds: list[int] = []
        self._values: list[bytes] = []
        self._pending = 0
        self._offset = 0
        self._index: list[tuple[int, int, bytes]] = []  # (offset, length, last key)
        self._hashes_seen = array("I")
        self._records = 0

    def add(self, key: bytes, kind: int, value: bytes | None) -> None:
        self.add_all(((key, kind, value),))

    def add_all(self, entries: Iterable[tuple[bytes, int, bytes | None]]) -> None:
        """Append records (sorted, unique keys); the hot loop of every flush and compaction."""
        keys, kinds, values = self._keys, self._kinds, self._values
        pending, limit = self._pending, self._block_bytes
        for key, kind, value in entries:
            if value is None:
                value = b""
            keys.append(key)
            kinds.append(kind)
            values.append(value)
            pending += len(key) + len(value) + 9
            if pending >= limit:
                self._emit()
                keys, kinds, values, pending = self._keys, self._kinds, self._values, 0
        self._pending = pending

    def _emit(self) -> None:
        if not self._keys:
            return
        data = self._seal.seal(encode_block(self._keys, self._kinds, self._values), TABLE_BLOCK, self._offset)
        self._hashes_seen.extend(map(filter_hash, self._keys))
        self._file.write(data)
        self._index.append((self._offset, len(data), self._keys[-1]))
        self._offset += len(data)
        self._records += len(self._keys)
        self._keys, self._kinds, self._values, self._pending = [], [], [], 0

    @property
    def records(self) -> int:
        return self._records + len(self._keys)

    def finish(self) -> TableInfo:
        self._emit()
        n = len(self._index)
        last_keys = [k for _, _, k in self._index]
        index = b"".join(
            [
                _U32.pack(n),
                struct.pack(f"<{n}Q", *(o for o, _, _ in self._index)),
                struct.pack(f"<{n}I", *(ln for _, ln, _ in self._index)),
                struct.pack(f"<{n}I", *map(len, last_keys)),
                *last_keys,
            ]
        )
        bloom = BlockedBloom.for_keys(len(self._hashes_seen), self._bits_per_key, self._hashes)
        bloom.add_hashes(self._hashes_seen)
        index_off, seal = self._offset, self._seal
        index = seal.seal(index, TABLE_INDEX, index_off)
        bloom_off = index_off + len(index)
        bloom_bytes = seal.seal(bloom.to_bytes(), TABLE_BLOOM, bloom_off)
        head = _FOOTER.pack(
            MAGIC,
            ENCRYPTED_VERSION if seal.encrypted else FORMAT_VERSION,
            index_off,
            len(index),
            zlib.crc32(index),
            bloom_off,
            len(bloom_bytes),
            zlib.crc32(bloom_bytes),
            self._records,
            n,
            seal.file_id,
            0,
        )[:-4]
        self._file.write(index + bloom_bytes + head + _U32.pack(zlib.crc32(head)))
        self._file.sync()
        size = self._file.size
        self._file.close()
        return TableInfo(self.path, size, self._records, n)

    def abort(self) -> None:
        self._file.close()
