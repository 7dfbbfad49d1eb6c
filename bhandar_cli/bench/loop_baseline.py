"""The bare event loop the simulator is measured against: how many events per real second a heap of
timed callbacks runs on this machine, now, with nothing else to do.

Each event has the simulator's shape (sim/loop.py): a `(when, seq, fn, args)` entry popped from a
heapq, the clock set, the callback called, and the callback pushing the next event at a later
time, so the heap keeps a constant number of pending events. Measured in the same process as a
chaos run, it turns the run's events/s into a ratio that the CPU's speed cancels out of (and the
machine's load, as far as it stays the same during the run).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from itertools import count
from random import Random
from typing import Any

BATCH = 10_000  # events between reads of the real clock
PENDING = 256  # events waiting in the heap, about what a chaos run keeps
_DELAYS = 1024  # distinct delays, drawn once (a draw per event would measure the PRNG instead)


def bare_loop_rate(seconds: float = 0.5) -> float:
    """Events per real second of a bare heapq loop run for about `seconds`."""
    rng = Random(0)
    delays = [rng.expovariate(1000.0) for _ in range(_DELAYS)]
    heap: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
    seq = count()
    push, pop = heapq.heappush, heapq.heappop
    clock = [0.0]

    def reschedule(i: int) -> None:
        push(heap, (clock[0] + delays[i % _DELAYS], next(seq), reschedule, (i + 1,)))

    for i in range(PENDING):
        reschedule(i)
    events = 0
    started = time.perf_counter()
    elapsed = 0.0
    while elapsed < seconds:
        for _ in range(BATCH):
            when, _, fn, args = pop(heap)
            clock[0] = when
            fn(*args)
        events += BATCH
        elapsed = time.perf_counter() - started
    return events / elapsed
