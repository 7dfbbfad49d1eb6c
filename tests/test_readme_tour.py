"""The README's tour is what the REPL prints: every transcript block in it (lines `bhandar> CMD`
and what followed) is typed into the interactive REPL in a real 100-column terminal (tmux, the
real clock), and the screen must show what the README shows.

Two things are not fixed by the program alone, so they are compared as a reader would: a
duration (`converged after 0.2s`) must be the README's to within half a second or the time it
took, whichever is more (a README saying 1s where the REPL takes 0.3 s fails; a loaded machine
that takes twice as long does not); and a
notice (a line starting `·`, what the cluster noticed on its own) appears when the failure
detectors get there, so the notices must be the README's, in its order, wherever they land
between the lines. The README is the test's data: change the tour and this test checks the new
one."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

import bhandar_cli
from tests.repl.terminal_session import PROMPT, TerminalSession, prompt_problems

README = Path(bhandar_cli.__file__).parent.parent / "README.md"
WIDTH = 100
DURATION = re.compile(r"\b(\d+(?:\.\d+)?)s\b")


def transcripts() -> list[tuple[list[str], list[str]]]:
    """(commands, the lines after the first prompt) of each ``` block of the README with prompts."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line.rstrip())
    found = []
    for lines in blocks:
        if not any(line.startswith(f"{PROMPT} ") for line in lines):
            continue
        commands = [line.removeprefix(f"{PROMPT} ") for line in lines if line.startswith(f"{PROMPT} ")]
        found.append((commands, lines))
    return found


def test_the_readme_has_a_tour() -> None:
    assert len(transcripts()) >= 2


def split(lines: list[str]) -> tuple[list[str], list[str], list[float]]:
    """The lines without notices and with durations as `Ns`; the notices; the durations."""
    plain = [line for line in lines if not line.startswith("·")]
    durations = [float(d) for line in plain for d in DURATION.findall(line)]
    notices = [line for line in lines if line.startswith("·")]
    return [DURATION.sub("Ns", line) for line in plain], notices, durations


def notices_above(lines: list[str]) -> list[int]:
    """For each command of a transcript, how many notices the README shows above it."""
    counts, seen = [], 0
    for line in lines:
        seen += line.startswith("·")
        if line.startswith(f"{PROMPT} "):
            counts.append(seen)
    return counts


# What a reader at a reader's pace sees the cluster notice after each fault a tour makes.
NOTICED = {"partition": "· partition noticed: ", "heal": "· heal noticed: ", "kill": "· down: "}


def test_every_fault_a_transcript_makes_is_shown_noticed() -> None:
    """A partition, a heal or a kill is followed in its transcript by the notice a reader sees
    (the test below checks that notice does come): a tour without it shows less than a terminal."""
    for _, lines in transcripts():
        for at, line in enumerate(lines):
            words = line.removeprefix(f"{PROMPT} ").split() if line.startswith(f"{PROMPT} ") else []
            if words and words[0] in NOTICED:
                notice = NOTICED[words[0]] + (words[1] if words[0] == "kill" else "")
                assert any(later.startswith(notice) for later in lines[at + 1 :]), f"{line!r}: no {notice!r}"


def notices_shown(terminal: TerminalSession, at_least: int) -> bool:
    return sum(line.startswith("·") for line in terminal.screen()) >= at_least


@pytest.mark.parametrize("number", range(len(transcripts())))
def test_a_readme_transcript_is_what_the_repl_prints(number: int, tmp_path: Path) -> None:
    commands, expected = transcripts()[number]
    terminal = TerminalSession(tmp_path, width=WIDTH, height=40)
    try:
        for command, notices_before in zip(commands, notices_above(expected), strict=True):
            # A reader types at a reader's pace: the notices the README shows above a command have
            # landed before they type it (the failure detectors take seconds; typing takes less).
            terminal.wait_for(
                functools.partial(notices_shown, terminal, notices_before),
                f"the {notices_before} notices the README shows before {command!r}",
                timeout=30,
            )
            terminal.run(command)
        screen = terminal.transcript()
    finally:
        terminal.close()
    assert prompt_problems(screen, commands) == [], "\n".join(screen)
    printed = screen[next(i for i, line in enumerate(screen) if line.startswith(PROMPT)) : -1]
    said, notices, durations = split(printed)
    shown, shown_notices, shown_durations = split(expected)
    assert said == shown, "\n".join(printed)
    assert notices == shown_notices, "\n".join(printed)
    for real, readme in zip(durations, shown_durations, strict=True):
        assert abs(real - readme) <= max(0.5, real), f"the README says {readme}s where it took {real}s"
