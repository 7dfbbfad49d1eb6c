"""The checklist's staleness lines say what happened: a scenario where every read was fresh has no
"latest miss" to time (issue 41 found `latest miss 0.0 ms` printed when nothing was missed)."""

from __future__ import annotations

from typing import Any

from bhandar_cli.check.check_report import curve_line, plain_curve


def row(curve: tuple[tuple[float, float, int], ...], latest_miss_ms: float, missed: int) -> dict[str, Any]:
    return {
        "scenario": "no fault",
        "staleness": plain_curve(curve),
        "latest_miss_ms": latest_miss_ms,
        "missed_reads": missed,
    }


def test_a_scenario_where_no_read_missed_says_so() -> None:
    line = curve_line(row(((1.0, 1.0, 40), (5.0, 1.0, 12)), 0.0, 0))
    assert line == "no fault: <1 ms 100%, <5 ms 100%; no read missed a write"


def test_a_scenario_with_a_miss_names_the_latest() -> None:
    line = curve_line(row(((1.0, 0.5, 4), (5.0, 1.0, 12)), 0.8, 2))
    assert line == "no fault: <1 ms 50%, <5 ms 100%; the latest miss 0.8 ms after the ack"
