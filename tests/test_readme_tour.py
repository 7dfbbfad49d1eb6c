"""The README's tour is executed: every transcript block in it (lines `bhandar> CMD` and what the
REPL printed) is run in batch mode on a virtual clock, and the output must be what the README
shows, durations aside ("converged after 1s" may read 1.1s: the nodes' disk syncs run on real
threads beside the virtual clock). The README is the test's data: change the tour and this test
checks the new one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import bhandar_cli

README = Path(bhandar_cli.__file__).parent.parent / "README.md"
PROMPT = "bhandar> "
DURATION = re.compile(r"\b\d+(?:\.\d+)?s\b")


def normal(line: str) -> str:
    return DURATION.sub("Ns", line.rstrip())


def transcripts() -> list[tuple[list[str], list[str]]]:
    """(commands, expected output lines) of each ``` block of the README that holds prompts."""
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
            current.append(line)
    found = []
    for lines in blocks:
        if not any(line.startswith(PROMPT) for line in lines):
            continue
        commands = [line.removeprefix(PROMPT) for line in lines if line.startswith(PROMPT)]
        output = [normal(line) for line in lines if not line.startswith(PROMPT)]
        found.append((commands, output))
    return found


def test_the_readme_has_a_tour() -> None:
    assert len(transcripts()) >= 2


@pytest.mark.parametrize("number", range(len(transcripts())))
def test_a_readme_transcript_prints_what_the_readme_shows(number: int) -> None:
    commands, expected = transcripts()[number]
    done = subprocess.run(
        [sys.executable, "-P", "-m", "bhandar_cli", "repl", "--virtual-time"],
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=README.parent,
    )
    assert done.returncode == 0, done.stderr
    printed = [normal(line) for line in (done.stdout + done.stderr).splitlines()]
    assert printed == expected, "\n".join(printed)
