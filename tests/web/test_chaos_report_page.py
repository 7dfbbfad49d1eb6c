"""A chaos report of a failing seed (a planted store bug) opened from disk in a real browser: the
verdict and the replay command are at the top of the first screen, and every operation a violation
names is marked (▼) inside the timeline, where it can be seen."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By

from bhandar_cli.sim.chaos.report import reproduce_command
from tests.sim.chaos.test_report_html import PLANTED
from tests.support.chaos_cli import invoke


def test_a_failing_runs_report_shows_the_replay_command_first_and_marks_its_violations(
    tmp_path: Path, browser: Any
) -> None:
    target = tmp_path / "run.html"
    result = invoke("--seed", "13", "--ops", "1500", "--faults", "loss,clog", "--consistency", "quorum",
                    "--bug", "ack_before_quorum", "--report", str(target))  # fmt: skip
    assert result.exit_code == 1, result.output
    browser.get(target.as_uri())

    verdict = browser.find_element(By.CSS_SELECTOR, ".verdict.failed")
    replay = browser.find_element(By.CSS_SELECTOR, ".replay")
    assert verdict.is_displayed() and verdict.text.startswith("✖ FAILED")
    command = reproduce_command(replace(PLANTED))
    assert replay.is_displayed() and command in replay.text
    # At the top: on the first screen (1280x720), above the timeline.
    timeline = browser.find_element(By.XPATH, "//h2[starts-with(normalize-space(), 'Timeline')]")
    assert replay.rect["y"] + replay.rect["height"] <= 720
    assert replay.rect["y"] < timeline.rect["y"]

    listed = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "ol.violations li")]
    assert listed and all(f"violation: {v}" in result.stderr for v in listed)
    named = {int(n) for v in listed for n in re.findall(r"#(\d+)", v)}
    # Each named operation carries one ▼, drawn (a real size) within the timeline's drawing.
    marks = browser.execute_script(
        "return [...document.querySelectorAll('text.violation')].map((m) => {"
        " const r = m.getBoundingClientRect(), s = m.ownerSVGElement.getBoundingClientRect();"
        " return {text: m.textContent, title: m.querySelector('title').textContent,"
        "  inside: r.width > 0 && r.height > 0 && r.left >= s.left - 1 && r.right <= s.right + 1"
        "   && r.top >= s.top - 1 && r.bottom <= s.bottom + 1}; })"
    )
    assert len(marks) == len(named) > 0
    assert all(m["inside"] and m["text"].startswith("▼") for m in marks)
    marked = {int(re.match(r"#(\d+) ", m["title"]).group(1)) for m in marks}  # type: ignore[union-attr]
    assert marked == named
    assert all(m["title"].endswith("named by a violation") for m in marks)
