"""The `Disk` interface: every byte the storage engine reads or writes goes through it.

Two implementations exist: `bhandar_cli.storage.disk.real_disk.RealDisk` (files, `os.fsync`) and
`bhandar_cli.storage.disk.sim_disk.SimDisk` (in memory; a crash loses what was never synced). The engine is
written against this contract only, so the simulator can test every crash point.

Durability contract (both implementations keep it):
- Bytes written through an `AppendFile` are durable only after its `sync()` returns.
- Metadata operations (creating a file with `open_append`, `rename`, `remove`, `link`,
  `makedirs`, `truncate`) are durable when they return: the real disk fsyncs the parent
  directory (POSIX does not make a new directory entry durable otherwise).
- `rename` is atomic: after a crash the destination holds either the old or the new file.

Threads (see storage/engine.py for the ownership rule): the engine's owner thread makes every call,
except that a background job's worker writes, fsyncs, opens and may remove the one new file it
was handed, reads immutable tables through handles opened before, and a function returned by
`AppendFile.sync_later` runs in a worker. Implementations keep their counters exact under that.

Paths are plain strings with `/` separators (`join` below), so the simulator needs no OS.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Protocol, runtime_checkable


@runtime_checkable
class AppendFile(Protocol):
    """A file open for appending. Writes may be buffered until `flush` or `sync`."""

    def write(self, data: bytes) -> None: ...

    def flush(self) -> None:
        """Hand buffered bytes to the operating system (survives a process crash, not power loss)."""
        ...

    def sync(self) -> None:
        """Make every byte written so far durable (flush, then fsync)."""
        ...

    def sync_later(self) -> Callable[[], None]:
        """Hand buffered bytes to the operating system now, and return a function that makes them
        durable when called (once), from any thread. It fsyncs through a descriptor of its own,
        so this handle may be closed, and the file removed, before it runs."""
        ...

    def close(self) -> None: ...

    @property
    def size(self) -> int:
        """The file's length including bytes not yet flushed."""
        ...


@runtime_checkable
class ReadFile(Protocol):
    """A file open for positional reads; stays readable after the path is removed (as POSIX)."""

    def pread(self, offset: int, length: int) -> bytes: ...

    @property
    def size(self) -> int: ...

    def close(self) -> None: ...


@runtime_checkable
class Disk(Protocol):
    """What an LSM tree needs from a file system."""

    @property
    def fsync_count(self) -> int:
        """Fsyncs of files and directories since the disk was made."""
        ...

    @property
    def bytes_written(self) -> int:
        """Bytes handed to files through `AppendFile.write`."""
        ...

    def open_append(self, path: str) -> AppendFile:
        """Open `path` for appending, creating it (durably) if it does not exist."""
        ...

    def open_read(self, path: str) -> ReadFile: ...

    def read(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        """Read `length` bytes at `offset` (to the end when `length` is None)."""
        ...

    def fsync(self, path: str) -> None:
        """Make the contents of an already written file durable."""
        ...

    def rename(self, src: str, dst: str) -> None:
        """Atomically replace `dst` with `src`."""
        ...

    def listdir(self, path: str) -> list[str]:
        """Names (not paths) in a directory, sorted; empty if the directory does not exist."""
        ...

    def remove(self, path: str) -> None: ...

    def link(self, src: str, dst: str) -> None:
        """Hard link: `dst` names the same bytes as `src` (used for snapshots)."""
        ...

    def size(self, path: str) -> int: ...

    def exists(self, path: str) -> bool: ...

    def makedirs(self, path: str) -> None:
        """Create a directory and its parents; no error if it exists."""
        ...

    def truncate(self, path: str, size: int) -> None:
        """Cut a file to `size` bytes, durably."""
        ...


def join(*parts: str) -> str:
    """Join path parts with `/` (pure string work, no OS call)."""
    return posixpath.join(*parts)


def write_file_atomically(disk: Disk, path: str, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves the old or the new content, never a mix.

    Write a temporary file, fsync it, then rename it over the target (the rename is durable on
    return by the Disk contract). Without the fsync before the rename, a crash could leave the
    new name pointing at an empty or partial file (the ext4 "zero-length file" problem).
    """
    tmp = path + ".tmp"
    if disk.exists(tmp):
        disk.remove(tmp)
    f = disk.open_append(tmp)
    try:
        f.write(data)
        f.sync()
    finally:
        f.close()
    disk.rename(tmp, path)
