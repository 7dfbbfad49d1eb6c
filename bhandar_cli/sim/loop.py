"""A single-threaded discrete-event loop: a heap of timestamped callbacks and a simulated clock.

Ties are broken by insertion order, so a run depends only on its seed (unlike trio, which
randomises the order of ready tasks on purpose).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any


class EventLoop:
    """Simulated time in seconds; nothing here reads a real clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0
        self.events = 0
        self._stopped = False

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (max(when, self.now), self._seq, fn, args))

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        self.call_at(self.now + delay, fn, *args)

    def push(self, when: float, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """`call_at` without the argument packing, for the simulator's hottest callers."""
        self._seq += 1
        heapq.heappush(self._heap, (when if when > self.now else self.now, self._seq, fn, args))

    def step(self) -> bool:
        """Run the next event; False when there is none."""
        if not self._heap:
            return False
        when, _, fn, args = heapq.heappop(self._heap)
        self.now = when
        self.events += 1
        fn(*args)
        return True

    def run_until(self, when: float) -> None:
        """Run every event scheduled up to `when`, then set the clock to `when`."""
        self.run(when)
        self.now = max(self.now, when)

    def run(self, deadline: float = math.inf) -> bool:
        """Run events until `stop()` is called (True) or none is left up to `deadline` (False).

        This is the hot loop of every simulation, so `step` is inlined here.
        """
        heap = self._heap
        pop = heapq.heappop
        self._stopped = False
        while heap and heap[0][0] <= deadline:
            when, _, fn, args = pop(heap)
            self.now = when
            self.events += 1
            fn(*args)
            if self._stopped:
                return True
        return False

    def discard(self) -> None:
        """The event just run found it had been cancelled (a step brought forward leaves its old
        heap entry behind): it is not counted, so events/s measures work done, not heap pops."""
        self.events -= 1

    def stop(self) -> None:
        """Make the running `run` return after the current event."""
        self._stopped = True

    def run_until_true(self, condition: Callable[[], bool], deadline: float) -> bool:
        """Run events until `condition()` holds (True) or simulated time reaches `deadline` (False)."""
        heap = self._heap
        while not condition():
            if not heap or heap[0][0] > deadline:
                self.now = max(self.now, deadline)
                return condition()
            self.step()
        return True

    def pending(self) -> int:
        return len(self._heap)
