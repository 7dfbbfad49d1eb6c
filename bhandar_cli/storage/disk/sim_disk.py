"""A simulated disk in memory, for crash tests of the storage engine.

Each file is a bytearray and a count of its bytes already synced: bytes past that count were
written but not fsynced. `crash(rng)` models a power loss: unsynced bytes are lost, except that with
`torn=True` a random prefix of each file's unsynced tail survives (some pages reached the platter).
Metadata operations (create, rename, remove, link, makedirs, truncate) are durable on return, as
the `Disk` contract promises (the real disk fsyncs the directory for them).

To crash *inside* an engine operation, set `crash_at` to an operation count: the mutating call
that reaches it raises `SimulatedCrash` (a write at that point lands in the unsynced tail first,
so it can be torn). Handles opened before a crash refuse to work afterwards, which catches a dead
engine being used by mistake. `flip_bit` damages a file for corruption tests. Counts fsyncs and
bytes written.

A background job's worker thread may write its own file while the engine's thread appends to the
WAL (see `storage.disk.interface`), so one lock guards all of the disk's state, as a kernel serialises
its file-system calls. The simulator itself runs jobs on one thread, so its crashes stay
deterministic.
"""

from __future__ import annotations

import functools
import posixpath
import random
import threading
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _locked(method: Callable[Concatenate[SimDisk, _P], _R]) -> Callable[Concatenate[SimDisk, _P], _R]:
    @functools.wraps(method)
    def locked(disk: SimDisk, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with disk._lock:
            return method(disk, *args, **kwargs)

    return locked


class SimulatedCrash(Exception):
    """The simulated machine lost power during this disk operation."""


class _Inode:
    __slots__ = ("data", "synced")

    def __init__(self) -> None:
        self.data = bytearray()
        self.synced = 0  # data[:synced] survives a crash


def _norm(path: str) -> str:
    return posixpath.normpath(path)


class SimAppendFile:
    def __init__(self, disk: SimDisk, inode: _Inode) -> None:
        self._disk, self._inode, self._gen = disk, inode, disk.generation
        self._closed = False

    def _alive(self) -> None:
        if self._disk.generation != self._gen:
            raise RuntimeError(
                "a file handle from before a simulated crash was used (the dead engine ran on)"
            )
        if self._closed:
            raise ValueError("write to a closed file")

    def write(self, data: bytes) -> None:
        with self._disk._lock:
            self._alive()
            crash = self._disk._tick()
            self._inode.data += data
            self._disk.bytes_written += len(data)
        if crash:
            raise SimulatedCrash("crash during write")

    def flush(self) -> None:
        self._alive()  # nothing is buffered above the simulated OS

    def sync(self) -> None:
        self._alive()
        self._disk._fsync_inode(self._inode, self._gen)

    def sync_later(self) -> Callable[[], None]:
        self._alive()
        disk, inode, gen = self._disk, self._inode, self._gen
        return lambda: disk._fsync_inode(inode, gen)

    def close(self) -> None:
        self._closed = True

    @property
    def size(self) -> int:
        return len(self._inode.data)


class SimReadFile:
    def __init__(self, disk: SimDisk, inode: _Inode) -> None:
        self._disk, self._inode, self._gen = disk, inode, disk.generation

    def pread(self, offset: int, length: int) -> bytes:
        with self._disk._lock:
            if self._disk.generation != self._gen:
                raise RuntimeError(
                    "a file handle from before a simulated crash was used (the dead engine ran on)"
                )
            return bytes(self._inode.data[offset : offset + length])

    @property
    def size(self) -> int:
        return len(self._inode.data)

    def close(self) -> None:
        pass


class SimDisk:
    """An in-memory `Disk` that can crash, tear writes and flip bits."""

    def __init__(self) -> None:
        self._files: dict[str, _Inode] = {}
        self._dirs: set[str] = {"/", "."}
        self.fsync_count = 0
        self.bytes_written = 0
        self.ops = 0  # mutating operations so far
        self.crash_at: int | None = None
        self.generation = 0
        self.crashes = 0
        self._lock = threading.RLock()  # guards every field above and every inode

    def _fsync_inode(self, inode: _Inode, generation: int) -> None:
        with self._lock:
            if generation != self.generation:
                raise RuntimeError(
                    "a file handle from before a simulated crash was used (the dead engine ran on)"
                )
            if self._tick():
                raise SimulatedCrash("crash during fsync")
            inode.synced = len(inode.data)
            self.fsync_count += 1

    def _tick(self) -> bool:
        """Count a mutating operation; True if the crash point is here (caller raises)."""
        self.ops += 1
        if self.crash_at is not None and self.ops >= self.crash_at:
            self.crash_at = None
            return True
        return False

    def _meta(self, what: str) -> None:
        if self._tick():
            raise SimulatedCrash(f"crash before {what}")

    def _inode(self, path: str) -> _Inode:
        try:
            return self._files[_norm(path)]
        except KeyError:
            raise FileNotFoundError(f"no such file: {path}") from None

    def _parent_exists(self, path: str) -> None:
        parent = posixpath.dirname(_norm(path)) or "."
        if parent not in self._dirs:
            raise FileNotFoundError(f"no such directory: {parent}")

    # ---- the Disk interface -------------------------------------------------------------------

    @_locked
    def open_append(self, path: str) -> SimAppendFile:
        p = _norm(path)
        if p not in self._files:
            self._parent_exists(p)
            self._meta(f"creating {p}")
            self._files[p] = _Inode()
        return SimAppendFile(self, self._files[p])

    @_locked
    def open_read(self, path: str) -> SimReadFile:
        return SimReadFile(self, self._inode(path))

    @_locked
    def read(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        data = self._inode(path).data
        return bytes(data[offset:] if length is None else data[offset : offset + length])

    @_locked
    def fsync(self, path: str) -> None:
        inode = self._inode(path)
        self._meta(f"fsync of {path}")
        inode.synced = len(inode.data)
        self.fsync_count += 1

    @_locked
    def rename(self, src: str, dst: str) -> None:
        inode = self._inode(src)
        self._parent_exists(dst)
        self._meta(f"rename {src} -> {dst}")
        del self._files[_norm(src)]
        self._files[_norm(dst)] = inode

    @_locked
    def listdir(self, path: str) -> list[str]:
        p = _norm(path)
        names = {posixpath.basename(f) for f in self._files if posixpath.dirname(f) == p}
        names |= {posixpath.basename(d) for d in self._dirs if posixpath.dirname(d) == p and d != p}
        return sorted(names)

    @_locked
    def remove(self, path: str) -> None:
        self._inode(path)
        self._meta(f"remove {path}")
        del self._files[_norm(path)]

    @_locked
    def link(self, src: str, dst: str) -> None:
        inode = self._inode(src)
        self._parent_exists(dst)
        if _norm(dst) in self._files:
            raise FileExistsError(f"file exists: {dst}")
        self._meta(f"link {src} -> {dst}")
        self._files[_norm(dst)] = inode

    @_locked
    def size(self, path: str) -> int:
        return len(self._inode(path).data)

    @_locked
    def exists(self, path: str) -> bool:
        p = _norm(path)
        return p in self._files or p in self._dirs

    @_locked
    def makedirs(self, path: str) -> None:
        p = _norm(path)
        if p in self._dirs:
            return
        self._meta(f"mkdir {p}")
        while p not in self._dirs:
            self._dirs.add(p)
            p = posixpath.dirname(p) or "."

    @_locked
    def truncate(self, path: str, size: int) -> None:
        inode = self._inode(path)
        self._meta(f"truncate {path}")
        del inode.data[size:]
        inode.synced = len(inode.data)

    # ---- faults -------------------------------------------------------------------------------

    @_locked
    def crash(self, rng: random.Random | None = None, *, torn: bool = True) -> dict[str, int]:
        """Power loss: drop unsynced bytes (keeping a random prefix of each tail if `torn`).

        Returns {path: unsynced bytes that survived} for files whose tail was torn.
        """
        if torn and rng is None:
            raise ValueError("a torn crash needs an rng to choose what survives")
        self.generation += 1
        self.crashes += 1
        self.crash_at = None
        kept: dict[str, int] = {}
        seen: set[int] = set()
        for path, inode in sorted(self._files.items()):
            if id(inode) in seen:
                continue
            seen.add(id(inode))
            tail = len(inode.data) - inode.synced
            keep = rng.randint(0, tail) if torn and tail and rng is not None else 0
            if keep:
                kept[path] = keep
            del inode.data[inode.synced + keep :]
            inode.synced = len(inode.data)
        return kept

    @_locked
    def flip_bit(self, path: str, bit: int | None = None, rng: random.Random | None = None) -> int:
        """Flip one bit of a file (chosen by `rng` when `bit` is None); returns the bit index."""
        inode = self._inode(path)
        if not inode.data:
            raise ValueError(f"cannot flip a bit of the empty file {path}")
        if bit is None:
            if rng is None:
                raise ValueError("flip_bit needs a bit index or an rng")
            bit = rng.randrange(len(inode.data) * 8)
        inode.data[bit >> 3] ^= 1 << (bit & 7)
        return bit

    @_locked
    def unsynced_bytes(self) -> int:
        return sum(len(i.data) - i.synced for i in {id(i): i for i in self._files.values()}.values())
