"""The real `Disk`: files through `os`, with the fsyncs POSIX needs for durability.

- Appends are buffered in user space (up to 1 MiB) and handed to the OS by `flush`/`sync`, so a
  put costs no system call; `sync` then calls `os.fsync`. (Under the `none` policy writes reach the
  OS at the engine's `sync()` points and are never fsynced.)
- A new directory entry (file creation, rename, link, remove, mkdir) is durable only once the
  directory itself is fsynced, so every such call fsyncs the parent directory before returning.
- `rename` is `os.replace`, atomic on POSIX file systems.
- `sync_later` fsyncs through a duplicate descriptor (`os.dup`), so the engine may close or delete
  a WAL while a worker thread is still syncing it: the file stays open until that sync ends.
- Worker threads write their own files (see `storage.disk.interface`), so the two counters are bumped
  under a lock; nothing else here is shared between threads.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading


def _fsync_dir(disk: RealDisk, path: str) -> None:
    fd = os.open(path or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    disk.count_fsync()


class _DetachedSync:
    """An fsync to run later, from any thread, through a descriptor of its own (see `sync_later`)."""

    def __init__(self, disk: RealDisk, fd: int) -> None:
        self._disk, self._fd = disk, fd

    def __call__(self) -> None:
        if self._fd < 0:
            raise RuntimeError("this fsync already ran (a sync function is called once)")
        try:
            os.fsync(self._fd)
        finally:
            self._release()
        self._disk.count_fsync()

    def _release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # never called (an earlier fsync of its batch failed): free the fd
        self._release()


class RealAppendFile:
    _BUFFER = 1 << 20

    def __init__(self, disk: RealDisk, path: str) -> None:
        self._disk = disk
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._buf = bytearray()

    def write(self, data: bytes) -> None:
        self._buf += data
        self._size += len(data)
        self._disk.count_written(len(data))
        if len(self._buf) >= self._BUFFER:
            self.flush()

    def flush(self) -> None:
        buf = self._buf
        if not buf:
            return
        view = memoryview(buf)
        done = 0
        try:
            while done < len(buf):
                done += os.write(self._fd, view[done:])
        finally:
            view.release()
            del buf[:done]

    def sync(self) -> None:
        self.flush()
        os.fsync(self._fd)
        self._disk.count_fsync()

    def sync_later(self) -> _DetachedSync:
        self.flush()
        return _DetachedSync(self._disk, os.dup(self._fd))

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            self.flush()
        finally:
            os.close(self._fd)
            self._fd = -1

    @property
    def size(self) -> int:
        return self._size


class RealReadFile:
    """Positional reads through a read-only memory map: a block read is a slice, no system call.

    Only immutable files (SSTables) are opened this way, so the map never sees the file shrink.
    """

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size
        self._map = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ) if self._size else None

    def pread(self, offset: int, length: int) -> bytes:
        if self._map is None:
            return os.pread(self._fd, length, offset)
        return self._map[offset : offset + length]

    @property
    def size(self) -> int:
        return self._size

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # tables dropped by a compaction are closed when unreferenced
        self.close()


class RealDisk:
    """`Disk` over the local file system."""

    def __init__(self) -> None:
        self._counts_lock = threading.Lock()  # guards the two counters below, and only them
        self._fsyncs = 0
        self._written = 0

    @property
    def fsync_count(self) -> int:
        return self._fsyncs

    @property
    def bytes_written(self) -> int:
        return self._written

    def count_fsync(self) -> None:
        with self._counts_lock:
            self._fsyncs += 1

    def count_written(self, n: int) -> None:
        with self._counts_lock:
            self._written += n

    def open_append(self, path: str) -> RealAppendFile:
        created = not os.path.exists(path)
        f = RealAppendFile(self, path)
        if created:
            _fsync_dir(self, os.path.dirname(path))
        return f

    def open_read(self, path: str) -> RealReadFile:
        return RealReadFile(path)

    def read(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(-1 if length is None else length)

    def fsync(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.count_fsync()

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)
        _fsync_dir(self, os.path.dirname(dst))
        if os.path.dirname(src) != os.path.dirname(dst):
            _fsync_dir(self, os.path.dirname(src))

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def remove(self, path: str) -> None:
        os.remove(path)
        _fsync_dir(self, os.path.dirname(path))

    def link(self, src: str, dst: str) -> None:
        os.link(src, dst)
        _fsync_dir(self, os.path.dirname(dst))

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def makedirs(self, path: str) -> None:
        path = os.path.abspath(path)
        if os.path.isdir(path):
            return
        parent = os.path.dirname(path)
        self.makedirs(parent)  # each new level's entry must be made durable in its parent
        with contextlib.suppress(FileExistsError):  # made meanwhile by someone else: fine
            os.mkdir(path)
        _fsync_dir(self, parent)

    def truncate(self, path: str, size: int) -> None:
        os.truncate(path, size)
        self.fsync(path)
