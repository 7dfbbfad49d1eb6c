"""`EpochClock`: trio time as Unix seconds, so node time in data reads as a date everywhere."""

from __future__ import annotations

import time

import trio


class EpochClock(trio.abc.Clock):
    """Trio time as seconds since the Unix epoch, read from the monotonic clock.

    Trio's default clock starts at a random offset in every process. Node time ends up in data
    (sibling timestamps decide last-write-wins, hints record when they were made), so every
    process of a cluster, and a node restarted later, must share one time line.
    """

    def __init__(self) -> None:
        self._offset = time.time() - time.monotonic()

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return time.monotonic() + self._offset

    def deadline_to_sleep_time(self, deadline: float) -> float:
        return deadline - self.current_time()
