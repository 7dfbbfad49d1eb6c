"""The MANIFEST: which SSTables are live (oldest first) and which WAL files still matter.

Format 1 (a plain engine's): one header line `BHANDAR-MANIFEST 1 <crc32 of the body, 8 hex
digits>\\n`, then a JSON body `{"next_file": N, "log_number": L, "tables": ["000004.sst", ...]}`.

Format 2 (an encrypting engine's, sealed): the header line is `BHANDAR-MANIFEST 2 <tag>\\n`, the
tag an HMAC-SHA256 of the body under the data key (cipher.py `authenticate`), and the body also
holds `generation` (one more at each MANIFEST written to the directory) and `plain` (the plain
files of before the directory was encrypted that the engine may still read: any other plain
table or WAL is refused). Someone without the key can neither change it nor make one up.

Rollback: after each sealed MANIFEST the engine writes `GENERATION` (its generation, tagged the
same way). A MANIFEST older than it (an earlier copy put back) is refused, as is a directory whose
sealed MANIFEST is missing or replaced by a format-1 one while `GENERATION` exists, or whose
`GENERATION` is gone after the first generation. Putting back a whole directory's older files
together is not detected: that takes a record kept elsewhere.

Both are replaced only by `write_file_atomically` (temp file, fsync, rename), the MANIFEST first,
so after a crash each is the old or the new one and `GENERATION` is never ahead of the MANIFEST.

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
from typing import Any

from bhandar_cli.storage.cipher import DataCipher
from bhandar_cli.storage.disk import Disk, join, write_file_atomically
from bhandar_cli.storage.storage_errors import CorruptManifestError, DataKeyError

NAME = "MANIFEST"
GENERATION = "GENERATION"
_HEAD = b"BHANDAR-MANIFEST 1 "
_SEALED_HEAD = b"BHANDAR-MANIFEST 2 "
_GENERATION_HEAD = "bhandar-manifest-generation"


@dataclass(frozen=True)
class Manifest:
    next_file: int = 1
    log_number: int = 0
    tables: tuple[str, ...] = field(default_factory=tuple)
    generation: int = 0  # sealed MANIFESTs only: counts those written to the directory
    plain: tuple[str, ...] = ()  # sealed MANIFESTs only: plain files the engine may still read
    sealed: bool = False  # read from (or to be written as) format 2

    def encode(self, cipher: DataCipher | None) -> bytes:
        fields: dict[str, Any] = {
            "next_file": self.next_file,
            "log_number": self.log_number,
            "tables": list(self.tables),
        }
        if cipher is None:
            body = json.dumps(fields, separators=(",", ":")).encode()
            return _HEAD + f"{zlib.crc32(body):08x}\n".encode() + body
        fields.update(generation=self.generation, plain=list(self.plain))
        body = json.dumps(fields, separators=(",", ":")).encode()
        return _SEALED_HEAD + cipher.authenticate(NAME.encode(), body).encode() + b"\n" + body

    @classmethod
    def decode(cls, data: bytes, where: str, cipher: DataCipher | None = None) -> Manifest:
        head, sep, body = data.partition(b"\n")
        if sep and head.startswith(_SEALED_HEAD):
            if cipher is None:
                raise DataKeyError(f"storage at {where} has a sealed MANIFEST and no data key was given")
            if not cipher.authentic(
                NAME.encode(), body, head[len(_SEALED_HEAD) :].decode("ascii", "replace")
            ):
                raise CorruptManifestError(
                    where,
                    "MANIFEST fails its authentication (changed by someone without the data key); "
                    "restore the node from its replicas",
                )
            obj = cls._fields(body, where)
            try:
                extra = int(obj["generation"]), tuple(str(p) for p in obj["plain"])
            except (ValueError, KeyError, TypeError) as e:
                raise CorruptManifestError(where, f"MANIFEST body is not valid ({e})") from None
            return cls(*cls._core(obj, where), extra[0], extra[1], sealed=True)
        if not sep or not head.startswith(_HEAD):
            raise CorruptManifestError(where, "MANIFEST has no valid header line (damaged file)")
        try:
            crc = int(head[len(_HEAD) :], 16)
        except ValueError:
            raise CorruptManifestError(where, "MANIFEST header has no checksum (damaged file)") from None
        if zlib.crc32(body) != crc:
            raise CorruptManifestError(where, "MANIFEST checksum mismatch (damaged file)")
        return cls(*cls._core(cls._fields(body, where), where))

    @staticmethod
    def _fields(body: bytes, where: str) -> dict[str, Any]:
        try:
            obj = json.loads(body)
        except ValueError as e:
            raise CorruptManifestError(where, f"MANIFEST body is not valid ({e})") from None
        if not isinstance(obj, dict):
            raise CorruptManifestError(where, "MANIFEST body is not valid (not an object)")
        return obj

    @staticmethod
    def _core(obj: dict[str, Any], where: str) -> tuple[int, int, tuple[str, ...]]:
        try:
            return int(obj["next_file"]), int(obj["log_number"]), tuple(str(t) for t in obj["tables"])
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptManifestError(where, f"MANIFEST body is not valid ({e})") from None


def load(disk: Disk, directory: str, cipher: DataCipher | None = None) -> Manifest | None:
    """The directory's manifest, or None if it has none."""
    path = join(directory, NAME)
    if not disk.exists(path):
        return None
    return Manifest.decode(disk.read(path), directory, cipher)


def store(
    disk: Disk, directory: str, manifest: Manifest, cipher: DataCipher | None = None, witness: bool = True
) -> None:
    """Write the MANIFEST (sealed under `cipher`), then, sealed and with `witness`, GENERATION."""
    write_file_atomically(disk, join(directory, NAME), manifest.encode(cipher))
    if cipher is not None and witness:
        number = str(manifest.generation).encode()
        line = (
            f"{_GENERATION_HEAD} {manifest.generation} {cipher.authenticate(GENERATION.encode(), number)}\n"
        )
        write_file_atomically(disk, join(directory, GENERATION), line.encode())


def check_generation(disk: Disk, directory: str, manifest: Manifest | None, cipher: DataCipher) -> None:
    """Raise CorruptManifestError if the MANIFEST of an encrypting engine's directory was removed,
    replaced by an unsealed one or rolled back (see the module docstring)."""
    path = join(directory, GENERATION)
    if not disk.exists(path):
        if manifest is not None and manifest.sealed and manifest.generation > 1:
            raise CorruptManifestError(
                directory,
                f"{GENERATION} is missing beside MANIFEST generation {manifest.generation} (removed?)",
            )
        return
    parts = disk.read(path).decode("ascii", "replace").split()
    if len(parts) != 3 or parts[0] != _GENERATION_HEAD or not parts[1].isdigit():
        raise CorruptManifestError(directory, f"{GENERATION} is not valid (damaged file)")
    if not cipher.authentic(GENERATION.encode(), parts[1].encode(), parts[2]):
        raise CorruptManifestError(
            directory, f"{GENERATION} fails its authentication (changed by someone without the data key)"
        )
    written = int(parts[1])
    if manifest is None or not manifest.sealed:
        what = "missing" if manifest is None else "not sealed (replaced by an unauthenticated one)"
        raise CorruptManifestError(
            directory, f"MANIFEST is {what}, though generation {written} was written here"
        )
    if manifest.generation < written:
        raise CorruptManifestError(
            directory,
            f"MANIFEST is generation {manifest.generation}, older than generation {written} written "
            "here: an earlier copy was put back (rolled back); restore the node from its replicas",
        )


def file_name(number: int, ext: str) -> str:
    return f"{number:06d}.{ext}"


def file_number(name: str) -> tuple[int, str] | None:
    """(number, extension) of `000012.sst` / `000013.log`; None for any other name."""
    stem, dot, ext = name.partition(".")
    if dot and ext in ("sst", "log") and stem.isdigit():
        return int(stem), ext
    return None
