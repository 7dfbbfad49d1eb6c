"""Encryption at rest: the data cipher (AES-256-GCM) and the key check of a storage directory.

What is sealed, and how (the framing lives with each format: wal.py, sstable.py):
- a sealed unit is `nonce (12 bytes) | ciphertext | tag (16 bytes)` (`OVERHEAD` = 28 bytes);
- each nonce is 96 random bits from the `random_bytes` the driver hands in (`os.urandom` on a
  node; storage itself does no I/O). Random nonces need no counter that a crash or a truncated
  WAL tail could set back, so a nonce is never reused under the key (the chance two of 2^32
  units collide is below 2^-32);
- the associated data binds a unit to its file and its place: `BHNDR-AD | kind | file id |
  position`, where the file id is 8 random bytes written in the file's own header (WAL) or
  footer (SSTable) and the position is the unit's byte offset. A block copied to another
  offset or into another file fails its tag, like a changed byte: a corruption, never served.

Key check: an encrypting engine writes `KEYCHECK` (the key's id, an HMAC of a fixed label: it
says nothing of the key) in its directory once its first sealed MANIFEST is stored. Opening that
directory later without a key, or with another one, raises `DataKeyError` before anything is
read, so a node never quarantines good files it merely cannot read. The key itself never reaches
the disk here.

What is not sealed is authenticated: `authenticate` is an HMAC-SHA256 under a key derived from
the data key, which the MANIFEST and its generation witness carry (manifest.py), so a table list
changed or rolled back by someone without the key is detected.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bhandar_cli.storage.disk import Disk, join, write_file_atomically
from bhandar_cli.storage.storage_errors import DataKeyError

KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
OVERHEAD = NONCE_BYTES + TAG_BYTES
FILE_ID_BYTES = 8
KEYCHECK = "KEYCHECK"
_AD = struct.Struct("<8sc8sQ")
WAL_RECORD, TABLE_BLOCK, TABLE_INDEX, TABLE_BLOOM = b"W", b"B", b"I", b"F"


class DataCipher:
    """Seals and opens units under one 256-bit data key. Thread-safe (a flush job's worker
    seals blocks while the owner thread seals WAL records)."""

    def __init__(self, key: bytes, random_bytes: Callable[[int], bytes]) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a data key is {KEY_BYTES} bytes, got {len(key)}")
        self._aead = AESGCM(key)
        self._random = random_bytes
        self.key_id = hmac.new(key, b"bhandar data key id", hashlib.sha256).hexdigest()[:16]
        self._mac_key = hmac.new(key, b"bhandar metadata mac key", hashlib.sha256).digest()

    def __repr__(self) -> str:
        return f"DataCipher(key id {self.key_id})"  # never the key

    def authenticate(self, label: bytes, data: bytes) -> str:
        """The tag (hex) of `data` in the role `label` (a MANIFEST's body, its generation)."""
        return hmac.new(self._mac_key, label + b"\0" + data, hashlib.sha256).hexdigest()

    def authentic(self, label: bytes, data: bytes, tag: str) -> bool:
        return hmac.compare_digest(self.authenticate(label, data), tag)

    def new_file_id(self) -> bytes:
        return self._random(FILE_ID_BYTES)

    def seal(self, plain: bytes, kind: bytes, file_id: bytes, position: int) -> bytes:
        nonce = self._random(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plain, _AD.pack(b"BHNDR-AD", kind, file_id, position))

    def open(self, sealed: bytes, kind: bytes, file_id: bytes, position: int) -> bytes:
        """The plaintext of a sealed unit; ValueError if it was changed, moved or is not ours."""
        if len(sealed) < OVERHEAD:
            raise ValueError("too short to be sealed")
        try:
            return self._aead.decrypt(
                sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], _AD.pack(b"BHNDR-AD", kind, file_id, position)
            )
        except InvalidTag:
            raise ValueError("failed authentication (changed, moved, or sealed under another key)") from None


def check_key(disk: Disk, directory: str, cipher: DataCipher | None) -> bool:
    """Refuse (DataKeyError) to open an encrypted directory without its key or with another one.
    True if the directory is marked as encrypted under this key (`mark_key` ran before)."""
    path = join(directory, KEYCHECK)
    stored = disk.read(path).decode("ascii", "replace").split() if disk.exists(path) else None
    if stored is None:
        return False
    key_id = stored[-1] if stored else "?"
    if cipher is None:
        raise DataKeyError(
            f"storage at {directory} is encrypted (data key id {key_id}) and no data key was given"
        )
    if cipher.key_id != key_id:
        raise DataKeyError(
            f"storage at {directory} is encrypted with data key id {key_id}, not with the key "
            f"given (id {cipher.key_id})"
        )
    return True


def mark_key(disk: Disk, directory: str, cipher: DataCipher) -> None:
    """Mark a directory as encrypted under `cipher`'s key (once its first sealed MANIFEST is
    stored: until then it may still hold the plain files of before, which that MANIFEST lists)."""
    path = join(directory, KEYCHECK)
    if not disk.exists(path):
        write_file_atomically(disk, path, f"bhandar-data-key-id {cipher.key_id}\n".encode())


class FileSeal:
    """How the units of one file are sealed: plain (`cipher` None: `seal`/`open` return the
    bytes as they are) or under `cipher` with this file's id."""

    def __init__(self, cipher: DataCipher | None, file_id: bytes = bytes(FILE_ID_BYTES)) -> None:
        self.cipher, self.file_id = cipher, file_id

    @classmethod
    def new_file(cls, cipher: DataCipher | None) -> FileSeal:
        return cls(cipher, cipher.new_file_id() if cipher is not None else bytes(FILE_ID_BYTES))

    @classmethod
    def of_file(cls, cipher: DataCipher | None, encrypted: bool, file_id: bytes, path: str) -> FileSeal:
        """The seal of an existing file; DataKeyError if it is encrypted and no key was given."""
        if encrypted and cipher is None:
            raise DataKeyError(f"{path} is encrypted and no data key was given")
        return cls(cipher if encrypted else None, file_id)

    @property
    def encrypted(self) -> bool:
        return self.cipher is not None

    def seal(self, plain: bytes, kind: bytes, position: int) -> bytes:
        return plain if self.cipher is None else self.cipher.seal(plain, kind, self.file_id, position)

    def open(self, sealed: bytes, kind: bytes, position: int) -> bytes:
        return sealed if self.cipher is None else self.cipher.open(sealed, kind, self.file_id, position)
