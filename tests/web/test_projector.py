"""What the class is told to look at is true and readable (issue 41, the page's part): a page opened
after the cluster changed never shows the state from before."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import trio

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.web.background import serve_in_background
from tests.web.conftest import WebProcess, page_key, until

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
