"""Group commit off the owner thread: WAL fsyncs handed to workers, and learning how they ended.

`GroupCommit.begin` (owner thread) takes the WAL records not yet handed to any fsync and returns
one function that a worker runs to make every write made so far durable. A `SyncTicket` carries
each such function's progress back; it is the one object both threads touch: the worker sets
`started`, stores `error`, then sets `done`; the owner reads `error` only once `done` is set
(`threading.Event` orders the writes before it). The list of tickets is the owner's alone.

Records an earlier sync took may not be durable yet when a later sync begins: that sync may still
be running, or may never run (a driver cancelled before its thread started). So the later function
fsyncs those WAL files again too (cheap when their pages are already clean), and then waits for
every earlier sync that did start, raising if one failed: after a failed fsync the kernel may have
dropped dirty pages and a later fsync of the same file can report success anyway ("fsyncgate").
It never waits for a sync that has not started, so an abandoned one cannot block anybody.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from bhandar_cli.storage.storage_errors import EngineFailedError
from bhandar_cli.storage.wal import WALWriter


class SyncTicket:
    """One sync function handed out: which WALs it covers (owner) and how it went (worker)."""

    def __init__(self, wals: tuple[WALWriter, ...]) -> None:
        self.wals = wals
        self.started = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None  # written by the worker before `done` is set


class GroupCommit:
    """The syncs handed out whose outcome the owner has not collected yet (owner thread only)."""

    def __init__(self) -> None:
        self.tickets: list[SyncTicket] = []  # read directly by every get: not empty means busy

    @property
    def busy(self) -> bool:
        return bool(self.tickets)

    def collect(self) -> BaseException | None:
        """Forget the syncs that ended, and those whose WALs were all closed (their records are in
        an installed table); return the error of the first that failed, if one did."""
        failed = next((t.error for t in self.tickets if t.done.is_set() and t.error is not None), None)
        self.tickets = [t for t in self.tickets if not t.done.is_set() and not all(w.closed for w in t.wals)]
        return failed

    def begin(self, wals: list[WALWriter]) -> Callable[[], None] | None:
        """The function making every record appended to `wals` so far durable; None if no record
        waits for an fsync."""
        taken = [(w, f) for w in wals if (f := w.begin_sync()) is not None]
        earlier = [t for t in self.tickets if not t.done.is_set()]
        covered = {id(w) for w, _ in taken}
        for ticket in earlier:
            for w in ticket.wals:
                if not w.closed and id(w) not in covered and (f := w.resync()) is not None:
                    covered.add(id(w))
                    taken.append((w, f))
        if not taken:
            return None
        ticket = SyncTicket(tuple(w for w, _ in taken))
        self.tickets.append(ticket)
        fsyncs = [f for _, f in taken]

        def sync() -> None:
            ticket.started.set()
            try:
                for fsync in fsyncs:
                    fsync()
            except BaseException as e:
                ticket.error = e
                raise
            finally:
                ticket.done.set()
            for other in earlier:
                if other.started.is_set():
                    other.done.wait()
                    if other.error is not None:
                        failed = other.error
                        raise EngineFailedError(f"an earlier WAL fsync failed: {failed}") from failed

        return sync
