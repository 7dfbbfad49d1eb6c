"""client_pipeline.Pipeline: order of results, the window's bound, per-chain order, drain."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.client.procedures.pipeline import Pipeline


class ListSink:
    def __init__(self) -> None:
        self.taken: list[Any] = []
        self.flushes = 0

    def take(self, result: Any) -> None:
        self.taken.append(result)

    def flush(self) -> None:
        self.flushes += 1


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def sleeper(name: Any, seconds: float, log: list[tuple[str, Any, float]] | None = None) -> Any:
    async def job() -> Any:
        if log is not None:
            log.append(("start", name, trio.current_time()))
        await trio.sleep(seconds)
        if log is not None:
            log.append(("end", name, trio.current_time()))
        return name

    return job


@pytest.mark.parametrize("ordered", [True, False])
def test_results_in_submission_order_or_as_they_finish(ordered: bool) -> None:
    sink = ListSink()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            pipeline: Pipeline[int] = Pipeline(nursery, 8, sink, ordered)
            for i in range(5):
                await pipeline.submit(sleeper(i, 5 - i))  # the last submitted finishes first

    run(main)
    assert sink.taken == ([0, 1, 2, 3, 4] if ordered else [4, 3, 2, 1, 0])
    assert sink.flushes >= 1


def test_never_more_than_the_window_in_flight() -> None:
    in_flight = 0
    most = 0

    def job(seconds: float) -> Any:
        async def run_it() -> float:
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            await trio.sleep(seconds)
            in_flight -= 1
            return seconds

        return run_it

    sink = ListSink()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            pipeline: Pipeline[float] = Pipeline(nursery, 3, sink)
            for i in range(20):
                await pipeline.submit(job(1 + i % 4))

    run(main)
    assert most == 3
    assert len(sink.taken) == 20


def test_a_slow_head_holds_back_at_most_the_window() -> None:
    """Ordered: finished results wait for the head in the window, so the reader stops too."""
    log: list[tuple[str, Any, float]] = []
    sink = ListSink()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            pipeline: Pipeline[int] = Pipeline(nursery, 4, sink)
            await pipeline.submit(sleeper(0, 100, log))
            for i in range(1, 10):
                await pipeline.submit(sleeper(i, 0, log))

    run(main)
    started_before_head_ended = [n for kind, n, t in log if kind == "start" and t < 100]
    assert started_before_head_ended == [0, 1, 2, 3]
    assert sink.taken == list(range(10))


def test_one_chain_runs_in_order_other_chains_alongside() -> None:
    log: list[tuple[str, Any, float]] = []
    sink = ListSink()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            pipeline: Pipeline[str] = Pipeline(nursery, 8, sink, ordered=False)
            await pipeline.submit(sleeper("k1-first", 5, log), chain="k1")
            await pipeline.submit(sleeper("k1-second", 1, log), chain="k1")
            await pipeline.submit(sleeper("k2", 1, log), chain="k2")

    run(main)
    times = {(kind, name): t for kind, name, t in log}
    assert times[("start", "k1-second")] >= times[("end", "k1-first")] == 5
    assert times[("end", "k2")] == 1  # not held back by k1
    assert sink.taken == ["k2", "k1-first", "k1-second"]


def test_drain_waits_for_every_result() -> None:
    sink = ListSink()
    seen: list[int] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            pipeline: Pipeline[int] = Pipeline(nursery, 4, sink)
            for i in range(6):
                await pipeline.submit(sleeper(i, 1 + i))
            await pipeline.drain()
            seen.extend(sink.taken)
            await pipeline.submit(sleeper(6, 1))

    run(main)
    assert seen == [0, 1, 2, 3, 4, 5]
    assert sink.taken == list(range(7))


def test_window_must_be_positive() -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            with pytest.raises(ValueError, match="at least 1"):
                Pipeline(nursery, 0, ListSink())

    run(main)
