"""security/refusal_log.py: refused connections cost one log line per source per interval, with
a count, however many there are (a churning client wrote 15.9 MB of warnings in 30 s)."""

from __future__ import annotations

import logging

import pytest

from bhandar_cli.security.refusal_log import OTHERS, RefusalLog, source_of


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_churn_of_refusals_costs_lines_per_source_and_interval_not_per_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    refusals = RefusalLog(logging.getLogger("test.refusals"), interval=10.0, clock=clock)
    sources, intervals, per_interval = 3, 4, 500
    with caplog.at_level(logging.WARNING, logger="test.refusals"):
        for window in range(intervals):
            for i in range(per_interval):
                clock.now = window * 10.0 + i * (9.0 / per_interval)
                for s in range(sources):
                    refusals.refused(f"10.0.0.{s}:{40000 + i}", "evicted before their hello", f"closed {i}")
        refusals.flush()
    lines = [r.getMessage() for r in caplog.records]
    # Per source and interval: the first said at once, then one line with the count of the rest.
    assert len(lines) == sources * intervals * 2, lines[:6]
    summaries = [line for line in lines if line.startswith("refused ")]
    assert len(summaries) == sources * intervals
    assert all(f"refused {per_interval - 1} more connections from 10.0.0." in line for line in summaries)
    assert all(f"({per_interval - 1} evicted before their hello)" in line for line in summaries)
    assert f"the last: closed {per_interval - 1}" in summaries[0]


def test_one_refusal_is_said_at_once_and_in_full(caplog: pytest.LogCaptureFixture) -> None:
    refusals = RefusalLog(logging.getLogger("test.refusals"), clock=Clock())
    with caplog.at_level(logging.WARNING, logger="test.refusals"):
        refusals.refused("127.0.0.1:5000", "protocol", "closed the connection from 127.0.0.1:5000: bad hello")
        refusals.flush()
    assert [r.getMessage() for r in caplog.records] == [
        "closed the connection from 127.0.0.1:5000: bad hello"
    ]


def test_sources_past_the_most_told_apart_are_counted_together(caplog: pytest.LogCaptureFixture) -> None:
    refusals = RefusalLog(logging.getLogger("test.refusals"), clock=Clock(), max_sources=4)
    with caplog.at_level(logging.WARNING, logger="test.refusals"):
        for s in range(1000):  # an attacker with many addresses
            refusals.refused(f"10.1.{s // 256}.{s % 256}:1", "protocol", f"bad hello {s}")
        refusals.flush()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 + 1 + 1, lines  # four sources, then "other sources": first and count
    assert f"refused {1000 - 5} more connections from {OTHERS}" in lines[-1]


def test_the_source_is_the_address_without_its_port() -> None:
    assert source_of("127.0.0.1:4242") == "127.0.0.1"
    assert source_of("[::1]:4242") == "::1"
    assert source_of("::1:4242") == "::1"
    assert source_of("?") == "?"
