"""One process per data directory: an exclusive lock on DIR/LOCK, held while the store is open
(LevelDB's LOCK file does the same). Two processes appending to one WAL and compacting one set of
SSTables would corrupt both, and with them what was acknowledged; that happened when a cluster file
was lost while its nodes ran and `cluster up` started a second set on the same directories.

The lock is the kernel's (flock), so a node that dies, SIGKILL included, leaves no stale lock. The
file names the pid that holds it, for the message. A lock still held is waited for a moment: a node
killed a moment ago (`cluster kill B; cluster start B`, a restore) may not have exited yet.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable

LOCK_FILE = "LOCK"
WAIT_S = 5.0  # how long a held lock is waited for before the open is refused
POLL_S = 0.05


class DirectoryLocked(Exception):
    """Another process has this data directory open (store/data_dir.py tells a node's user so as
    an unavailable store). The disk layer's own: it sits below the engine and its errors."""


def lock_data_dir(data_dir: str, wait: float | None = None) -> Callable[[], None]:
    """Take `data_dir`'s lock (DirectoryLocked if another process keeps it past `wait` seconds,
    WAIT_S by default); the function that releases it."""
    fd = os.open(os.path.join(data_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + (WAIT_S if wait is None else wait)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
                os.close(fd)
                by = f"process {holder}" if holder.isdigit() else "another process"
                raise DirectoryLocked(
                    f"data directory {data_dir} is in use by {by}: a node's data belongs to one "
                    "process at a time (is that node already running?)"
                ) from None
            time.sleep(POLL_S)
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            os.close(fd)  # closing the descriptor releases the lock

    return release
