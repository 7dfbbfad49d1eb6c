"""What the class is told to look at is readable (issue 41, the page's part): the log lays its tables
out at its box's real width, at both window sizes and both text sizes; the newest reply is never
folded away as older output; at every step of every demo, at both sizes and text sizes, the ring
keeps a readable size, the newest reply is whole and no table cell is cut where the log has room
(join and handoff have the longest narrations); a page opened after the cluster changed never
shows the state from before; and a partitioned card does not call a running node "certainly
down"."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from selenium.webdriver.support.ui import WebDriverWait

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.teach.demos import DEMOS
from bhandar_cli.web.background import serve_in_background
from tests.web.conftest import WebProcess, demo_process, page_key, until
from tests.web.layout import (
    POLL_S,
    RING_MIN_PX,
    SIZES,
    WIDE,
    layout_problems,
    log_cut_where_room,
    newest_hidden,
    ring_px,
    show,
)

STEP_S = 120  # one demo step in real time on a loaded machine


def log_settled(driver: Any, newest: str) -> bool:
    """The log shows `newest` as its newest command, laid out at the width the page measured."""
    return bool(
        driver.execute_script(
            "const o = document.getElementById('output'), l = o.querySelector('.line.newest');"
            "return !!l && l.textContent === '> ' + arguments[0] && o.dataset.columns === o.dataset.laidOut",
            newest,
        )
    )


def test_status_in_the_log_is_laid_out_at_the_boxs_width_at_every_size(web: WebProcess, browser: Any) -> None:
    web.command("put kv cart:1 tea")
    web.command("partition A | B C")  # the widest status: "partitioned" in every row
    web.command("status")
    browser.get(web.url)
    with urllib.request.urlopen(f"{web.url}api/log?columns={WIDE}", timeout=30) as response:
        status = json.loads(response.read())["log"][0]
    assert status["line"] == "status"
    natural = max(len(line.rstrip()) for line in status["text"].splitlines())
    columns = {}
    for width, height in SIZES:
        for large in (False, True):
            show(browser, width, height, large)
            until(browser, lambda d: log_settled(d, "status"))
            size = f"{width}x{height}{' large' if large else ''}"
            columns[size] = int(
                browser.execute_script("return document.getElementById('output').dataset.columns")
            )
            assert log_cut_where_room(browser, web.url) == [], size
            shown = browser.execute_script(
                "return [...document.querySelectorAll('#output .newest')].map((e) => e.textContent)"
            )
            if columns[size] >= natural:  # the box has room: every heading and cell whole
                assert not any("…" in line for line in shown), (size, shown)
    # The box is measured, not assumed: wider on the larger screen, narrower in large text, and
    # at 1920x1080 the whole status fits (it read `sta… no…` at 52 columns, half the box empty).
    assert columns["1920x1080"] > columns["1280x720"] > columns["1280x720 large"], columns
    assert columns["1920x1080"] >= natural, (columns, natural)


def test_a_long_reply_after_many_lines_is_whole_and_the_older_output_folds(
    web: WebProcess, browser: Any
) -> None:
    browser.get(web.url)
    show(browser, 1280, 720, True)
    for i in range(8):
        web.command(f"put kv many:{i} {i}")  # each prints a trace table: far more than the box holds
    web.command("trace on")
    web.command("put kv many:last 9")
    web.command("status")
    until(browser, lambda d: log_settled(d, "status"))
    assert newest_hidden(browser, web.url) == []
    # The reply's last row, the cluster's line, is on the screen; what was folded is older output.
    last = browser.execute_script(
        "const rows = [...document.querySelectorAll('#output .newest')];"
        "return rows[rows.length - 1].textContent"
    )
    (reply,) = web.command("status")
    assert last == reply["summary"]["line"]
    more = browser.execute_script("return document.querySelector('#output .more')?.textContent || ''")
    assert re.fullmatch(r"… \d+ older lines not shown", more), more
    assert browser.execute_script(
        "const o = document.getElementById('output'); return o.firstElementChild.classList.contains('more')"
    )
    assert layout_problems(browser) == []


# --- the demos with the longest narrations, step by step -------------------------------------------


def laid_out(driver: Any) -> bool:
    """The log's tables are laid out at the width the page measured its box at."""
    return bool(
        driver.execute_script(
            "const o = document.getElementById('output'); return o.dataset.columns === o.dataset.laidOut"
        )
    )


def step_ended(step: int) -> Callable[[Any], bool]:
    """Whether the page shows demo step `step` ended well (passed, or the last one: done)."""
    ended = ((str(step), "passed"), (str(step), "done"))
    return lambda driver: demo_state(driver) in ended


def demo_state(driver: Any) -> tuple[str, str]:
    return tuple(
        driver.execute_script(
            "const p = document.getElementById('demo-panel'); return [p.dataset.step, p.dataset.state]"
        )
    )


@pytest.mark.parametrize("name", sorted(DEMOS))
def test_at_each_step_the_ring_keeps_its_size_and_the_newest_reply_shows(
    name: str, tmp_path: Path, browser: Any
) -> None:
    steps = len(DEMOS[name].steps)
    with demo_process(tmp_path, name) as demo:
        url, enter = demo.url, demo.enter
        browser.get(url)
        WebDriverWait(browser, STEP_S, poll_frequency=POLL_S).until(lambda d: demo_state(d)[1] == "ready")
        for step in range(1, steps + 1):
            enter()
            WebDriverWait(browser, STEP_S, poll_frequency=POLL_S).until(step_ended(step))
            found = {}
            for width, height in SIZES:
                for large in (False, True):
                    show(browser, width, height, large)
                    until(browser, laid_out)
                    size = f"{width}x{height}{' large' if large else ''}"
                    problems = [f"ring {ring_px(browser):.0f} px"] if ring_px(browser) < RING_MIN_PX else []
                    problems += [f"newest reply hides {line!r}" for line in newest_hidden(browser, url)]
                    problems += log_cut_where_room(browser, url)
                    problems += layout_problems(browser)
                    if problems:
                        found[size] = problems
            assert found == {}, f"{name} step {step}: {found}"
        assert demo_state(browser) == (str(steps), "done")


# --- a page opened after the cluster changed ---------------------------------------------------------

# Installed before the page's own script: every summary and link text the page ever shows, in order.
RECORDER = r"""
window.seen = [];
addEventListener("DOMContentLoaded", () => {
  const s = document.getElementById("summary"), l = document.getElementById("link");
  const note = () => window.seen.push([s.textContent, l.textContent]);
  note();
  new MutationObserver(note).observe(s, { childList: true, characterData: true, subtree: true });
  new MutationObserver(note).observe(l, { childList: true, characterData: true, subtree: true });
});
"""


def state_now(web: WebProcess) -> dict[str, Any]:
    return state_now_at(web.url)


def state_now_at(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "api/state", timeout=30) as response:
        return dict(json.loads(response.read()))


def test_a_page_opened_after_a_change_never_shows_the_state_from_before(
    web: WebProcess, browser: Any
) -> None:
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORDER})
    assert state_now(web)["health"]["running"] == 5  # a snapshot is built: all five up
    # Typed in the session's terminal with no page open: nothing has rebuilt the snapshot since.
    web.type_line("kill C")
    until(browser, lambda _: "killed C" in web.output())
    snap = state_now(web)
    assert (snap["health"]["running"], snap["health"]["line"]) == (4, "4/5 running · down C")
    browser.get(web.url)
    until(browser, lambda d: d.execute_script("return window.seen.some(([, l]) => l === '● live')"))
    seen = browser.execute_script("return window.seen")
    summaries = [s for s, _ in seen if s != "connecting…"]
    assert summaries and all("down C" in s for s in summaries), seen
    # "● live" never stands beside "connecting…": live comes with the first fresh state.
    assert all(not (s == "connecting…" and link == "● live") for s, link in seen), seen
    # Revived with no page open, then the page reloaded: C is never shown down again.
    browser.get("about:blank")
    web.type_line("revive C")
    until(browser, lambda _: "revived C" in web.output())
    snap = state_now(web)
    assert "down C" not in snap["health"]["line"] and snap["health"]["running"] == 5, snap["health"]
    browser.get(web.url)
    until(browser, lambda d: d.execute_script("return window.seen.some(([, l]) => l === '● live')"))
    seen = browser.execute_script("return window.seen")
    assert not any("down C" in s for s, _ in seen), seen


def test_a_partitioned_card_says_unreachable_not_certainly_down(web: WebProcess, browser: Any) -> None:
    browser.get(web.url)
    web.command("partition A B | C D E")
    snap = state_now(web)
    observer = snap["members_from"]
    cut_off = {
        c["id"]
        for c in snap["nodes"]
        if c["group"] != next(n["group"] for n in snap["nodes"] if n["id"] == observer)
    }
    assert cut_off  # the observer is in one group: the other group's nodes are cut off from it

    def phis(d: Any) -> dict[str, str]:
        return dict(
            d.execute_script(
                "return [...document.querySelectorAll('.card')].map((c) =>"
                " [c.id.slice(5), c.querySelector('[data-field=phi]').textContent])"
            )
        )

    # Long enough cut off that their phi, seen from the observer, is in the millions.
    until(browser, lambda d: state_now(web)["nodes"][0]["state"] == "partitioned", timeout=30)
    until(
        browser,
        lambda d: all(c["phi"] >= 1000 for c in state_now(web)["nodes"] if c["id"] in cut_off),
        timeout=60,
    )
    until(browser, lambda d: all(phis(d).get(n) == "unreachable" for n in cut_off))
    titles = browser.execute_script(
        "return [...document.querySelectorAll('[data-field=phi]')].map((e) => e.title).filter((t) => t)"
    )
    assert titles and all(t.startswith(f"unreachable from {observer},") for t in titles), titles
    assert "∞" not in phis(browser).values(), phis(browser)


def first_streamed_state(url: str) -> dict[str, Any]:
    """The first state a newly opened page's event stream brings."""
    with urllib.request.urlopen(f"{url}api/events?key={page_key(url)}", timeout=30) as stream:
        event = ""
        for raw in stream:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event == "state":
                return dict(json.loads(line.removeprefix("data: ")))
    raise AssertionError("the stream ended before any state")


def test_the_state_served_is_never_older_than_the_sessions_last_command() -> None:
    """The REPL's `web` command (the page served beside a terminal session): a command typed in
    the terminal, with no page open, changes what /api/state and a newly opened page show at once;
    they never answer the snapshot built before it."""

    def line_of(snap: dict[str, Any]) -> str:
        return str(snap["health"]["line"])

    async def main() -> list[tuple[str, str]]:
        async with open_session(ClusterOptions(nodes=5, memory=True), "json", serve_in_background) as session:
            (reply,) = await session.run_line("web port=0")
            url = reply.to_json()["url"]
            seen = []
            for line in ("status", "kill C", "revive C"):
                await session.run_line(line)
                served = await trio.to_thread.run_sync(state_now_at, url)
                streamed = await trio.to_thread.run_sync(first_streamed_state, url)
                seen.append((line_of(served), line_of(streamed)))
            return seen

    (before, killed, revived) = trio.run(main)
    assert before == ("5/5 running", "5/5 running")
    assert killed == ("4/5 running · down C", "4/5 running · down C")
    assert all("down C" not in line for line in revived), revived
