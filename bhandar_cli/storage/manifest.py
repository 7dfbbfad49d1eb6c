"""The MANIFEST: which SSTables are live (oldest first) and which WAL files still matter.

Format: one header line `BHANDAR-MANIFEST 1 <crc32 of the body, 8 hex digits>\\n`, then a JSON body
`{"next_file": N, "log_number": L, "tables": ["000004.sst", ...]}`. It is replaced only by
`write_file_atomically` (temp file, fsync, rename), so after a crash it is the old or the new one.

- `tables`: the live tables in age order; any other `*.sst` in the directory is an orphan of an
  interrupted flush or compaction and is deleted at open.
- `log_number`: WAL files numbered ≥ this still hold writes not in any table; older ones are
  obsolete (their writes were flushed) and are deleted at open, never replayed.
- `next_file`: the next file number to hand out (tables and logs share one sequence).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field

from bhandar_cli.storage.disk import Disk, join, write_file_atomically
from bhandar_cli.storage.errors import CorruptManifestError

NAME = "MANIFEST"
_HEAD = b"BHANDAR-MANIFEST 1 "


@dataclass(frozen=True)
class Manifest:
    next_file: int = 1
    log_number: int = 0
    tables: tuple[str, ...] = field(default_factory=tuple)

    def encode(self) -> bytes:
        body = json.dumps(
            {"next_file": self.next_file, "log_number": self.log_number, "tables": list(self.tables)},
            separators=(",", ":"),
        ).encode()
        return _HEAD + f"{zlib.crc32(body):08x}\n".encode() + body

    @classmethod
    def decode(cls, data: bytes, where: str) -> Manifest:
        head, sep, body = data.partition(b"\n")
        if not sep or not head.startswith(_HEAD):
            raise CorruptManifestError(where, "MANIFEST has no valid header line (damaged file)")
        try:
            crc = int(head[len(_HEAD) :], 16)
        except ValueError:
            raise CorruptManifestError(where, "MANIFEST header has no checksum (damaged file)") from None
        if zlib.crc32(body) != crc:
            raise CorruptManifestError(where, "MANIFEST checksum mismatch (damaged file)")
        try:
            obj = json.loads(body)
            return cls(int(obj["next_file"]), int(obj["log_number"]), tuple(str(t) for t in obj["tables"]))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptManifestError(where, f"MANIFEST body is not valid ({e})") from None


def load(disk: Disk, directory: str) -> Manifest | None:
    """The directory's manifest, or None if it has none."""
    path = join(directory, NAME)
    if not disk.exists(path):
        return None
    return Manifest.decode(disk.read(path), directory)


def store(disk: Disk, directory: str, manifest: Manifest) -> None:
    write_file_atomically(disk, join(directory, NAME), manifest.encode())


def file_name(number: int, ext: str) -> str:
    return f"{number:06d}.{ext}"


def file_number(name: str) -> tuple[int, str] | None:
    """(number, extension) of `000012.sst` / `000013.log`; None for any other name."""
    stem, dot, ext = name.partition(".")
    if dot and ext in ("sst", "log") and stem.isdigit():
        return int(stem), ext
    return None
