"""One long-lived thread per node that runs its fsyncs, handed over with a queue.

A node process syncs its store hundreds of times a second. `trio.to_thread.run_sync` per sync
costs a capacity limiter, a context copy and a thread-cache hand-off each time (a profile of a node
under `bench` showed it near the top); a thread that stays and a queue cost one `put` and one
`run_sync_soon`. The thread runs nothing but what `run` hands it, one call at a time, and touches
no trio state: it reports back through the trio token only.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable

import trio


class SyncWorker:
    """Runs blocking calls in order on its own thread; `close` lets the thread end."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=f"{name}-sync", daemon=True)
        self._thread.start()

    async def run(self, call: Callable[[], None]) -> None:
        """Run `call` on the worker and wait for it (it cannot be abandoned: shield this against
        cancellation where the caller must know how it ended); re-raises what it raised."""
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()
        failure: list[BaseException] = []

        def work() -> None:
            try:
                call()
            except BaseException as exc:  # handed to the trio side, which raises it
                failure.append(exc)
            with contextlib.suppress(trio.RunFinishedError):  # nobody waits any more
                token.run_sync_soon(done.set)

        self._calls.put(work)
        await done.wait()
        if failure:
            raise failure[0]

    def close(self) -> None:
        self._calls.put(None)

    def _serve(self) -> None:
        while (work := self._calls.get()) is not None:
            work()
