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


def cluster_clock(virtual_time: bool) -> trio.abc.Clock:
    """The clock an in-process cluster runs on: virtual time (sleeps take no time, starting at 0)
    or Unix seconds, as process clusters use, so timestamps in data read as dates."""
    if virtual_time:
        import trio.testing  # only here: it is a test harness (and imports pytest when present)

        return trio.testing.MockClock(autojump_threshold=0)
    return EpochClock()
