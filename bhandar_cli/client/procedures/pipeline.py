"""Many client requests in flight at once, with bounded memory: the window `pipe`, `export` and
`import` push their requests through.

A job is an async callable that returns its result (failures included: a job never raises for a
request the cluster refused). At most `window` jobs are in flight *or waiting to be handed on*, so
a slow request at the head of an ordered stream holds back at most `window - 1` finished results,
never the whole input. Results go to the sink in submission order, or as they finish when
unordered; the sink is flushed after each batch it is handed (one result, or a run of ordered
ones an earlier result held back), so a program on the other end of a pipe sees an answer as soon
as it is ready.

Jobs on the same chain (a key) run one after another in submission order, as they would in a
REPL: `get kv k` then `put kv k v` writes with the context that get read, and two deletes of one
key never race. Jobs on different chains run concurrently.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, Protocol, TypeVar

import trio

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

Job = Callable[[], Awaitable[T]]


class Sink(Protocol[T_contra]):
    """Where finished results go: `take` one, `flush` after a batch."""

    def take(self, result: T_contra) -> None: ...
    def flush(self) -> None: ...


class Pipeline(Generic[T]):
    """Runs jobs in the caller's nursery, at most `window` at a time (its collaborators: the
    nursery that owns the tasks and the sink that receives the results)."""

    def __init__(self, nursery: trio.Nursery, window: int, sink: Sink[T], ordered: bool = True) -> None:
        if window < 1:
            raise ValueError(f"the window must be at least 1 (got {window})")
        self._nursery = nursery
        self._window = window
        self._sink = sink
        self._ordered = ordered
        self._slots = trio.Semaphore(window)
        self._submitted = 0
        self._next_out = 0  # ordered: the submission number the sink takes next
        self._finished: dict[int, T] = {}  # ordered: results waiting for an earlier one
        self._chains: dict[Hashable, trio.Event] = {}  # chain -> the event of its last job

    async def submit(self, job: Job[T], chain: Hashable | None = None) -> None:
        """Start `job` once a slot is free (waits while the window is full)."""
        await self._slots.acquire()
        seq = self._submitted
        self._submitted += 1
        before = None
        done = trio.Event()
        if chain is not None:
            before = self._chains.get(chain)
            self._chains[chain] = done
        self._nursery.start_soon(self._run, seq, job, chain, before, done)

    async def drain(self) -> None:
        """Wait until every submitted job's result has reached the sink."""
        for _ in range(self._window):
            await self._slots.acquire()
        for _ in range(self._window):
            self._slots.release()

    async def _run(
        self, seq: int, job: Job[T], chain: Hashable | None, before: trio.Event | None, done: trio.Event
    ) -> None:
        if before is not None:
            await before.wait()
        try:
            result = await job()
        finally:
            done.set()
            if chain is not None and self._chains.get(chain) is done:
                del self._chains[chain]  # the chain is idle: forget it (memory stays bounded)
        if not self._ordered:
            self._sink.take(result)
            self._slots.release()
        else:
            self._finished[seq] = result
            if self._next_out not in self._finished:
                return  # an earlier job is still running: its finish hands this one on
            while self._next_out in self._finished:
                self._sink.take(self._finished.pop(self._next_out))
                self._next_out += 1
                self._slots.release()
        self._sink.flush()
