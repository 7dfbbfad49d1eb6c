"""Storage errors, named by whose fault they are.

- `CorruptTableError`, `CorruptManifestError`: a file on disk is damaged (the disk's fault, or
  someone edited the directory). The message names the file and the check that failed.
- `EngineFailedError`: an earlier I/O error left the engine in an unknown state; reopen it.
- `EngineClosedError`: the caller used a closed engine (the caller's bug).
- `DataKeyError`: encrypted files but no data key, or the wrong one (the operator's setup).
- Bad arguments (a `str` key, a negative size) raise `TypeError` / `ValueError` as usual.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base of every storage error."""


class CorruptTableError(StorageError):
    """An SSTable failed a checksum or a structural check; it must not be served."""

    def __init__(self, path: str, what: str) -> None:
        self.path = path
        self.what = what
        super().__init__(f"corrupt SSTable {path}: {what} (the file is damaged; it will not be served)")


class CorruptManifestError(StorageError):
    """The MANIFEST (the list of live tables) is damaged or missing while tables exist."""

    def __init__(self, path: str, what: str) -> None:
        self.path = path
        self.what = what
        super().__init__(f"cannot open storage at {path}: {what}")


class EngineFailedError(StorageError):
    """A disk operation failed mid-way; the in-memory state can no longer be trusted."""


class EngineClosedError(StorageError):
    """The engine was closed; this is a bug in the caller."""


class DataKeyError(StorageError):
    """Encrypted files and no data key, or another key (the operator's setup): nothing is read,
    nothing is quarantined; start again with the right key."""
