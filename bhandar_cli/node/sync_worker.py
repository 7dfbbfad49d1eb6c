"""One long-lived thread per node that runs its fsyncs, handed over with a queue.

A node process syncs its store hundreds of times a second. `trio.to_thread.run_sync` per sync
costs a capacity limiter, a context copy and a thread-cache hand-off each time (a profile of a node
under `bench` showed it near the top); a thread that stays and a queue cost one `put`, and the
answer one `run_sync_soon` of the callback the caller gave, on trio's thread: no task waits for a
sync, so none is woken twice around each one.

The thread runs nothing but what `submit` hands it, one call at a time, and touches no trio state:
it reports back through the trio token only. On Linux it runs under SCHED_BATCH, so waking it
(once per sync) does not preempt the node's event loop, which then would sit holding the GIL the
woken thread needs while the kernel runs something else: a visible share of a loaded node's time.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable

import trio

Done = Callable[[BaseException | None], None]  # called on trio's thread with what the call raised


class SyncWorker:
    """Runs blocking calls in order on its own thread; `close` lets the thread end."""

    def __init__(self, name: str) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._calls: queue.SimpleQueue[tuple[Callable[[], None], Done] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=f"{name}-sync", daemon=True)
        self._thread.start()

    def submit(self, call: Callable[[], None], done: Done) -> None:
        """Run `call` on the worker; then `done(error)` runs on trio's thread (error: what `call`
        raised, or None). `done` must not raise: it runs as a trio callback, outside any task."""
        self._calls.put((call, done))

    def close(self) -> None:
        self._calls.put(None)

    def _serve(self) -> None:
        with contextlib.suppress(AttributeError, OSError):  # not Linux, or not allowed: no matter
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))  # 0: this thread
        while (item := self._calls.get()) is not None:
            call, done = item
            error: BaseException | None = None
            try:
                call()
            except BaseException as exc:  # handed to the trio side, which decides what it means
                error = exc
            with contextlib.suppress(trio.RunFinishedError):  # nobody waits any more
                self._token.run_sync_soon(done, error)
