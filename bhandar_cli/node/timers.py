"""Callbacks due at trio times, run by one task: the in-process network's messages in flight.

A heap ordered by due time (then by insertion, so equal times keep their order); the task sleeps
until the earliest is due, so thousands of messages in flight cost no tasks.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import trio


class TrioTimers:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self._wakeup = trio.Event()

    def schedule(self, delay: float, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        """Call `fn(*args)` in `delay` seconds (the `Schedule` of `host.network.Network`)."""
        when = trio.current_time() + delay
        if not self._heap or when < self._heap[0][0]:
            self._wakeup.set()
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, fn, args))

    async def run(self) -> None:
        """Run callbacks as they fall due; runs until cancelled."""
        heap = self._heap
        while True:
            if heap:
                with trio.move_on_at(heap[0][0]):
                    await self._wakeup.wait()
            else:
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                _, _, fn, args = heapq.heappop(heap)
                fn(*args)
