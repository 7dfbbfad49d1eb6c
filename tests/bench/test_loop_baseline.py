"""The bare event loop chaos measures itself against, and how its figure reaches the output.

No test asserts a speed: only that the baseline runs, counts events and is printed beside the
run's own events/s on the real-time line and in the JSON object, with the run's CPU time.
"""

from __future__ import annotations

import json
import re

from bhandar_cli.bench.loop_baseline import bare_loop_rate
from tests.support.chaos_cli import invoke


def test_the_bare_loop_measures_a_rate() -> None:
    assert bare_loop_rate(0.01) > 0


def test_the_real_time_line_puts_the_bare_loop_beside_the_run() -> None:
    result = invoke("--seed", "4", "--ops", "200")
    assert result.exit_code == 0, result.stderr
    line = result.stdout.splitlines()[-1]
    found = re.fullmatch(
        r"real time +[0-9.]+ s, ([0-9,]+) events/s \(bare loop ([0-9,]+) events/s, ratio ([0-9.]+)\), "
        r"[0-9,]+ ops/s; CPU ([0-9.]+) s, ([0-9,]+) us per operation, ([0-9.]+) us per event",
        line,
    )
    assert found, line
    run, bare, ratio, cpu, per_op, per_event = (float(g.replace(",", "")) for g in found.groups())
    assert bare > 0 and abs(ratio - run / bare) < 0.01
    assert cpu > 0 and abs(per_op - 1e6 * cpu / 200) <= 0.5 + 1e6 * 0.005 / 200
    assert per_event > 0 and per_op / per_event > 1  # a client operation takes several events


def test_the_json_object_has_the_bare_loop_and_the_ratio() -> None:
    result = invoke("--seed", "4", "--ops", "200", "-o", "json")
    assert result.exit_code == 0, result.stderr
    obj = json.loads(result.stdout)
    assert obj["bare_loop_events_per_second"] > 0
    # events_per_second is rounded to a whole number, the ratio computed before rounding.
    assert abs(obj["events_ratio"] - obj["events_per_second"] / obj["bare_loop_events_per_second"]) < 1e-3
    # CPU time, which other programs on the machine disturb far less than real time.
    assert obj["cpu_seconds"] > 0
    assert abs(obj["cpu_us_per_op"] - 1e6 * obj["cpu_seconds"] / 200) < 1e6 * 0.001 / 200 + 0.1
    per_event = obj["cpu_us_per_event"]
    assert abs(per_event * obj["events"] - 1e6 * obj["cpu_seconds"]) < 0.01 * obj["events"] + 1e3
