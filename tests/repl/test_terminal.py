"""The interactive REPL in a real 80-column terminal (tmux): README tour 2, the notices that arrive
while commands run or while the prompt waits, and commands sent from the web page's box. Every
line of output starts on a line of its own, never on the prompt's, a fresh prompt follows each
command, and every line fits the terminal's width (wrapped at words by the REPL, not cut by the
terminal)."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.repl.terminal_session import PROMPT, TerminalSession, prompt_problems
from tests.test_readme_tour import transcripts
from tests.web.conftest import page_key

LONG_SENTENCE = "neither write had seen the other so the store keeps both until a merge replaces them"


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[TerminalSession]:
    session = TerminalSession(tmp_path, width=80, height=30)
    try:
        yield session
    finally:
        session.close()


def test_readme_tour_two_and_the_notices_never_print_on_the_prompt_line(terminal: TerminalSession) -> None:
    tour, _ = transcripts()[1]
    for command in tour:
        terminal.run(command)
    # Notices that arrive while a command runs (the partition noticed, during the sleep) and
    # while the prompt waits (the heal noticed, after `heal` has answered).
    for command in ("partition A | B C", "sleep 4s", "heal"):
        terminal.run(command)
    terminal.wait_for(lambda: any("heal noticed" in line for line in terminal.screen()), "the heal noticed")
    terminal.run("status")
    lines = terminal.transcript()
    assert lines[0].startswith("Bhandar "), lines[:3]  # the banner first, no prompt above it
    assert prompt_problems(lines, terminal.commands) == [], "\n".join(lines)
    notices = [line for line in lines if line.startswith("·")]
    assert [n for n in notices if n.startswith("· down: C")] == ["· down: C (noticed by A, B, D, E)"]
    assert "· up again: C" in notices
    assert any(n.startswith("· partition noticed") for n in notices) and "heal noticed" in notices[-1]
    assert all(len(line) <= terminal.width for line in lines), lines


def test_a_command_from_the_web_page_prints_above_the_prompt_wrapped_to_the_terminal(
    terminal: TerminalSession,
) -> None:
    terminal.run("web port=0")
    found = [m for line in terminal.screen() if (m := re.search(r"(http://127\.0\.0\.1:\d+/)", line))]
    assert found, terminal.screen()
    url = found[0].group(1)
    line = f"put kv note '{LONG_SENTENCE}'; get kv note"
    request = urllib.request.Request(
        url + "api/command",
        data=json.dumps({"line": line}).encode(),
        headers={"Content-Type": "application/json", "X-Bhandar-Key": page_key(url)},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert all(reply["ok"] for reply in json.loads(response.read())["replies"])
    terminal.wait_for(lambda: any("context " in text for text in terminal.screen()), "the get's reply")
    terminal.wait_for(terminal.idle, "the prompt back under the page's command")
    lines = terminal.transcript()
    assert prompt_problems(lines, terminal.commands) == [], "\n".join(lines)
    echoed = lines[lines.index(f"{PROMPT} web port=0") + 1 : -1]
    assert all(len(text) <= terminal.width for text in echoed), echoed
    # Wrapped at words: the sentence reads whole once the lines are joined with spaces.
    assert LONG_SENTENCE in " ".join(text.strip() for text in echoed), echoed
    terminal.run("get kv note")  # and the prompt still takes commands
    assert prompt_problems(terminal.transcript(), terminal.commands) == [], "\n".join(terminal.transcript())
