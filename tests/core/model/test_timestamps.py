"""`parse_moment`: every form `restore NAME until=TIME` takes, and a clear refusal of the rest."""

from __future__ import annotations

import datetime as dt

import pytest

from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.model.timestamps import parse_moment, show_moment

NOW = dt.datetime(2026, 12, 4, 18, 20, 8, 500_000).astimezone().timestamp()


@pytest.mark.parametrize(
    ("text", "seconds_before_now"),
    [
        ("now", 0.0),
        ("NOW", 0.0),
        ("now-30s", 30.0),
        ("now - 5m", 300.0),
        ("now-1.5", 1.5),
        ("now-2h", 7200.0),
    ],
)
def test_now_and_a_moment_before_it(text: str, seconds_before_now: float) -> None:
    assert parse_moment(text, NOW) == pytest.approx(NOW - seconds_before_now)


def test_a_time_of_day_is_today_and_iso_and_unix_seconds_are_as_given() -> None:
    today = dt.datetime.fromtimestamp(NOW).astimezone()
    assert (
        parse_moment("17:45:03", NOW)
        == today.replace(hour=17, minute=45, second=3, microsecond=0).timestamp()
    )
    assert parse_moment("@1733334303.5", NOW) == 1733334303.5
    assert parse_moment(show_moment(NOW) or "", NOW) == pytest.approx(NOW, abs=0.001)


@pytest.mark.parametrize("text", ["now+30s", "now-", "now-soon", "nowish", "yesterday", "25:00", "@x", ""])
def test_anything_else_is_bad_input_naming_the_forms(text: str) -> None:
    with pytest.raises(BadInput, match=r"bad time .*now-30s"):
        parse_moment(text, NOW)
