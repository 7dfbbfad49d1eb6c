"""`bhandar demo NAME --web`: the snapshot's `demo` field follows the demo step by step (virtual
clock), the page is served for the demo's session and stops with it, and in a real browser the
Narration panel shows each step's narration and its ✓ lines."""

from __future__ import annotations

import io
import json
import re
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from rich.console import Console
from selenium.webdriver.support.ui import WebDriverWait
from typer.testing import CliRunner

from bhandar_cli.client.exit_status import EXIT_FAILED, EXIT_OK
from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.teach.demo_kit import Demo, DemoContext, Expect, Step, get_values, lines, text
from bhandar_cli.teach.demo_runner import play, run_demo
from bhandar_cli.teach.demos_failures import QUORUM
from bhandar_cli.teach.narration import Narration
from bhandar_cli.web.demo_page import WebPage
from bhandar_cli.web.state import WebState
from tests.teach.test_demos import cli
from tests.web.conftest import demo_process
from tests.web.layout import POLL_S

WAIT_S = 20
TEA_LINES = ["put kv k '[\"tea\"]'", "get kv k"]
TEA = Step(
    "We write tea and read it back.",
    TEA_LINES,
    (Expect("the get returns tea", get_values([["tea"]])),),
    then="Tea it is.",
)
MILK = Step("We read it again.", ["get kv k"], (Expect("the get returns milk", get_values([["milk"]])),))


def tiny(*steps: Step) -> Demo:
    return Demo("tiny", "A tiny demo", "for tests", "nowhere", ClusterOptions(nodes=3, memory=True), steps)


def played(demo: Demo) -> tuple[int, dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """Play `demo` with a web state listening: exit code, the final snapshot, every narration view
    the state was handed, and a snapshot taken before the demo."""

    async def main() -> tuple[int, dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
        async with open_session(demo.options, "json") as session:
            state = WebState(session)
            session.observers.append(state.observe)
            before = await state.snapshot()
            narration = Narration(demo.name, demo.title, demo.summary, len(demo.steps))
            views: list[dict[str, Any]] = []
            narration.listeners += [state.set_demo, views.append]
            quiet = Console(file=io.StringIO())
            outcome = await play(demo, session, quiet, quiet, narration=narration)
            after = json.loads(json.dumps(await state.snapshot()))
            return outcome.code, after, views, before

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_the_snapshot_carries_the_demos_step_narration_and_checks() -> None:
    code, snap, views, before = played(tiny(TEA, TEA))
    assert code == EXIT_OK
    assert before["demo"] is None  # no demo, no panel
    demo = snap["demo"]
    assert {k: demo[k] for k in ("name", "title", "steps", "step", "state")} == {
        "name": "tiny",
        "title": "A tiny demo",
        "steps": 2,
        "step": 2,
        "state": "done",
    }
    assert demo["say"] == TEA.say and demo["commands"] == TEA_LINES and demo["then"] == "Tea it is."
    assert demo["checks"] == [{"ok": True, "text": "✓ the get returns tea"}]
    # Step by step: step 1 ran, passed, then step 2 started afresh.
    states = [(v["step"], v["state"]) for v in views]
    assert states.index((1, "running")) < states.index((1, "passed")) < states.index((2, "running"))
    first_of_two = views[states.index((2, "running"))]
    assert first_of_two["checks"] == [] and first_of_two["commands"] == []


def test_a_failed_expectation_is_crossed_in_the_snapshot() -> None:
    code, snap, _, _ = played(tiny(TEA, MILK))
    assert code == EXIT_FAILED
    demo = snap["demo"]
    assert (demo["step"], demo["state"]) == (2, "failed")
    (check,) = demo["checks"]
    assert not check["ok"] and check["text"].startswith("✗ expected the get returns milk, but")
    assert "step 2/2" in demo["failure"]


def test_demo_web_serves_the_page_and_stops_it_at_the_end_of_input() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run_demo(tiny(TEA), stdin=io.StringIO(""), stdout=out, stderr=err, page=WebPage(0))
    assert (code, err.getvalue()) == (EXIT_OK, ""), out.getvalue()
    found = re.search(r"web view at (http://127\.0\.0\.1:\d+/)", out.getvalue())
    assert found, out.getvalue()
    assert "stays at" not in out.getvalue()  # end of input: no waiting for Enter
    with pytest.raises(urllib.error.URLError):  # and the page has stopped with the demo
        urllib.request.urlopen(found.group(1) + "api/state", timeout=5)


def panel(driver: Any) -> dict[str, Any]:
    """The Narration panel as the page shows it, read in one script (the page redraws meanwhile)."""
    return dict(
        driver.execute_script(
            "const p = document.getElementById('demo-panel');"
            "return {hidden: p.hidden, state: p.dataset.state, step: p.dataset.step,"
            " title: document.getElementById('demo-title').textContent,"
            " say: document.getElementById('demo-say').textContent,"
            " commands: document.getElementById('demo-commands').innerText,"
            " ok: [...document.querySelectorAll('#demo-checks li.ok')].map((e) => e.textContent),"
            " fail: [...document.querySelectorAll('#demo-checks li.fail')].map((e) => e.textContent)}"
        )
    )


def test_the_quorum_demo_narrates_on_the_page_and_the_page_stays_until_enter(
    tmp_path: Path, browser: Any
) -> None:
    with demo_process(tmp_path, "quorum") as demo:
        browser.get(demo.url)
        WebDriverWait(browser, WAIT_S, poll_frequency=POLL_S).until(lambda d: panel(d)["state"] == "ready")
        shown = panel(browser)
        assert not shown["hidden"] and "quorum" in shown["title"] and shown["ok"] == []

        demo.enter()  # step 1
        WebDriverWait(browser, WAIT_S, poll_frequency=POLL_S).until(
            lambda d: (panel(d)["step"], panel(d)["state"]) == ("1", "passed")
        )
        shown = panel(browser)
        first = QUORUM.steps[0]
        assert shown["say"] == text(first.say, DemoContext())  # step 1 reads no earlier reply
        assert shown["commands"].splitlines() == [
            f"bhandar> {line}" for line in lines(first.run, DemoContext())
        ]
        assert shown["ok"] == [f"✓ {e.what}" for e in first.expect] and shown["fail"] == []

        demo.enter(len(QUORUM.steps) - 1)  # the rest, as a class pressing Enter
        WebDriverWait(browser, 90, poll_frequency=POLL_S).until(lambda d: panel(d)["state"] == "done")
        shown = panel(browser)
        assert shown["step"] == str(len(QUORUM.steps))
        assert shown["ok"] == [f"✓ {e.what}" for e in QUORUM.steps[-1].expect]
        # The demo is over; the page stays up for the class until Enter.
        WebDriverWait(browser, WAIT_S, poll_frequency=POLL_S).until(
            lambda d: "the page stays at" in demo.log.read_text(errors="replace")
        )
        assert demo.proc.poll() is None
        demo.enter()
        assert demo.proc.wait(timeout=30) == EXIT_OK, demo.log.read_text()
        assert "every expectation met" in demo.log.read_text(errors="replace")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--web", "--virtual-time"], "--web serves the page in real time: drop --virtual-time"),
        (["--web", "--port", "70000"], "--port must be between 0 and 65535"),
    ],
)
def test_demo_web_bad_options_are_one_line_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli(), ["demo", "quorum", "--auto", *args])
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert message in line


def test_demo_web_on_a_taken_port_is_one_line_and_exit_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(cli(), ["demo", "quorum", "--auto", "--web", "--port", str(port)])
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"bhandar: cannot serve on 127.0.0.1:{port}")
    assert "bhandar> " not in result.stdout  # no step ran without its page
