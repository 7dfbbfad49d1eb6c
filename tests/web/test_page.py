"""The live page in a real browser: node cards, a kill typed in the session, a QUORUM put drawn as
a message sequence, a partition from the command box. Every wait is a bounded wait on a
condition (conftest.until), which finds the elements it reads itself: the page re-makes a node
card whenever its content changes, so a reference kept across calls goes stale."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.web.conftest import WebProcess, click, until


def cards(driver: Any) -> dict[str, str]:
    """Each node card's name and state as the page shows them (read in one script: the page
    redraws while we look)."""
    return dict(
        driver.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('.card')]"
            ".map((c) => [c.id.slice(5), c.dataset.state]))"
        )
    )


def phis(driver: Any) -> list[str]:
    """The phi each node card shows."""
    script = "return [...document.querySelectorAll('[data-field=phi]')].map((e) => e.textContent)"
    return list(driver.execute_script(script))


def attribute(driver: Any, selector: str, name: str) -> list[str]:
    """An attribute of every element the selector finds, read in one script."""
    return list(
        driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map((e) => e.getAttribute(arguments[1]))",
            selector,
            name,
        )
    )


def open_page(driver: Any, web: WebProcess) -> None:
    driver.get(web.url)
    until(driver, lambda d: len(cards(d)) == 5)


def type_command(driver: Any, line: str) -> None:
    box = driver.find_element(By.ID, "command")
    box.send_keys(line)
    box.send_keys(Keys.ENTER)


def test_five_node_cards_and_a_kill_in_the_session_turns_the_card_down(web: WebProcess, browser: Any) -> None:
    open_page(browser, web)
    assert cards(browser) == dict.fromkeys("ABCDE", "up")
    web.type_line("kill B")
    until(browser, lambda d: cards(d).get("B") == "down")
    assert cards(browser) == {**dict.fromkeys("ACDE", "up"), "B": "down"}
    # The page's session log shows what the terminal's command printed.
    until(browser, lambda d: "> kill B\nkilled B" in d.find_element(By.ID, "output").text)
    # The state is written, not only coloured (the card is found afresh: it is re-made often).
    until(browser, lambda d: "DOWN" in d.find_element(By.ID, "node-B").text)
    # The card's own button revives it, through the same session.
    click(browser, "#node-B [data-action=revive]")
    until(browser, lambda d: cards(d).get("B") == "up")
    until(browser, lambda d: "web> revive B" in web.output())


def test_a_quorum_put_draws_the_coordinator_and_the_replicas(web: WebProcess, browser: Any) -> None:
    open_page(browser, web)
    type_command(browser, "put kv web:seq 42 c=QUORUM")
    until(browser, lambda d: attribute(d, "#sequence", "data-participants") != [None])
    (participants_text,) = attribute(browser, "#sequence", "data-participants")
    participants = participants_text.split(",")
    (coordinator,) = attribute(browser, "#sequence", "data-coordinator")
    (prefs,) = web.command("prefs kv web:seq")
    assert participants[0] == "client"
    assert set(participants[1:]) == {coordinator, *prefs["replicas"]}
    assert len(participants) == 1 + len(prefs["replicas"])
    arrows = set(
        zip(
            attribute(browser, "line.msg", "data-from"),
            attribute(browser, "line.msg", "data-to"),
            strict=True,
        )
    )
    assert ("client", coordinator) in arrows and (coordinator, "client") in arrows
    for replica in set(prefs["replicas"]) - {coordinator}:
        assert (coordinator, replica) in arrows  # the write went to every replica
    assert any(src != coordinator and dst == coordinator for src, dst in arrows)  # an ack came back
    # The put focuses its key: the ring numbers its replicas in preference order.
    until(
        browser, lambda d: sorted(attribute(d, "[data-replica]", "data-replica")) == sorted(prefs["replicas"])
    )
    until(browser, lambda d: "web> put kv web:seq 42 c=QUORUM" in web.output())


def test_the_command_box_partition_draws_the_groups(web: WebProcess, browser: Any, tmp_path: Path) -> None:
    open_page(browser, web)

    def groups(d: Any) -> list[str]:
        return attribute(d, ".group", "data-members")

    assert groups(browser) == ["A,B,C,D,E"]
    web.command("put kv cart:42 '[\"rice\"]'")
    web.command("get kv cart:42")
    type_command(browser, "partition A | B C")
    until(browser, lambda d: groups(d) == ["A", "B,C", "D,E"])
    labels = browser.execute_script(
        "return [...document.querySelectorAll('.group > .label')].map((e) => e.textContent)"
    )
    assert labels[1] == "group 2: B, C"
    # Every node runs, cut off from the other groups: partitioned, in the REPL's words.
    until(browser, lambda d: set(cards(d).values()) == {"partitioned"})
    # A node the observing node cannot reach runs: its card says so, not phi ∞ ("certainly down").
    until(browser, lambda d: "unreachable" in phis(d))
    assert all(len(phi) <= 5 or phi == "unreachable" for phi in phis(browser)), phis(browser)
    size = browser.execute_script("return getComputedStyle(document.documentElement).fontSize")
    name = "return parseFloat(getComputedStyle(document.querySelector('.card .name')).fontSize)"
    card_name = browser.execute_script(name)
    browser.find_element(By.ID, "large").click()
    assert "large" in browser.find_element(By.TAG_NAME, "body").get_attribute("class")
    assert browser.execute_script("return getComputedStyle(document.body).fontSize") != size
    # Sizes are in rem: the cards' text grows too, not only text that inherits the body's size.
    assert browser.execute_script(name) > card_name * 1.2, (card_name, browser.execute_script(name))


def test_a_write_while_a_replica_is_down_shows_the_hint_and_its_fallback(
    web: WebProcess, browser: Any, tmp_path: Path
) -> None:
    """Also the screenshot of docs/web.md (BHANDAR_WEB_SCREENSHOT=docs/web.png to refresh it)."""
    open_page(browser, web)
    key = next(
        k for k in (f"cart:{i}" for i in range(100)) if "C" in web.command(f"prefs kv {k}")[0]["replicas"]
    )
    web.command(f"put kv {key} '[\"rice\"]'")
    web.type_line("kill C")
    until(browser, lambda d: cards(d).get("C") == "down")
    puts: list[dict[str, Any]] = []

    def hinted_put(_: Any) -> bool:
        # Until the peers' failure detectors convict C, a write is sent to C and simply not acked.
        puts.append(web.command(f'get kv {key}; put kv {key} \'["rice","oil"]\' c=QUORUM')[-1])
        return bool(puts[-1]["ok"] and puts[-1].get("hinted"))

    until(browser, hinted_put)
    put = puts[-1]
    holder = put["hinted"][0].split()[0]  # "D for C": the fallback that keeps C's write
    web.command(f"get kv {key}")
    browser.execute_script("document.querySelectorAll('#request-tabs button')[1].click()")
    until(
        browser,
        lambda d: any(
            "hint for C" in t
            for t in d.execute_script(
                "return [...document.querySelectorAll('#sequence text')].map((e) => e.textContent)"
            )
        ),
    )
    (participants,) = attribute(browser, "#sequence", "data-participants")
    assert holder in participants.split(",") and "C" in participants.split(",")
    # Every word of the diagram is inside it: long notes wrap, none is cut at the right edge.
    width, overflowing = browser.execute_script(
        "const box = document.getElementById('sequence'), w = box.viewBox.baseVal.width;"
        "return [w, [...box.querySelectorAll('text')]"
        ".filter((t) => { const b = t.getBBox(); return b.x < 0 || b.x + b.width > w + 0.5; })"
        ".map((t) => t.textContent)]"
    )
    assert width > 0 and overflowing == [], (width, overflowing)
    until(
        browser,
        lambda d: d.execute_script(
            "return document.querySelector(`#node-${arguments[0]} [data-field=hints]`).textContent", holder
        ).endswith("→C)"),  # "1 (1→C)": hints held, and for whom
    )
    # The key panel: C is down and was not asked, so what it holds is unknown, not zero.
    down = "return document.querySelector('#key [data-holder=C]').textContent"
    until(browser, lambda d: "down, not asked" in d.execute_script(down))
    assert "unknown" in browser.execute_script(down) and "0 version" not in browser.execute_script(down)
    shot = os.environ.get("BHANDAR_WEB_SCREENSHOT") or str(tmp_path / "web.png")
    assert browser.save_screenshot(shot)
    assert Path(shot).stat().st_size > 10_000
