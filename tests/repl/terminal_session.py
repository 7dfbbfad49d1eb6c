"""The interactive REPL in a real terminal: `bhandar` in a detached tmux session of a given size.

A command is typed only when the previous one has finished, which is when the last prompt line of
the screen is an empty `bhandar>` again below the command's own line (a bounded wait on that
condition, polling the screen; never a sleep standing in for it). The transcript is tmux's whole
history, each line as the terminal shows it (`-J` joins only what the terminal itself wrapped).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

PROMPT = "bhandar>"
WAIT_S = 90.0


class TerminalSession:
    def __init__(self, home: Path, width: int = 80, height: int = 30, args: tuple[str, ...] = ()) -> None:
        if shutil.which("tmux") is None:
            pytest.fail("tmux is missing: apt-get install -y tmux", pytrace=False)
        self.name = f"bhandar-test-{uuid.uuid4().hex[:8]}"
        self.width = width
        self.commands: list[str] = []
        env = {
            "XDG_STATE_HOME": str(home / "state"),  # a history of its own
            "TERM": "xterm-256color",
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
            **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
        }
        # The pane's size is the terminal's: not COLUMNS and LINES, which GNU readline exports (80
        # columns without a terminal) when pytest imports it, and a tmux server started by the
        # test passes on to every session.
        command = [sys.executable, "-P", "-m", "bhandar_cli", "repl", *args]
        self._tmux(
            "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
            "env", "-u", "COLUMNS", "-u", "LINES", *(f"{k}={v}" for k, v in env.items()), *command,
        )  # fmt: skip
        self._tmux("set-option", "-t", self.name, "history-limit", "20000")
        self.wait_for(self.idle, "the first prompt")

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def screen(self) -> list[str]:
        """Every line so far, the history included, trailing blanks removed."""
        text = self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.name)
        return [line.rstrip() for line in text.splitlines()]

    def transcript(self, timeout: float = WAIT_S) -> list[str]:
        """The lines up to and including the last prompt (below it: only the status bar), from one
        capture that shows the fresh prompt: two captures (one to see the session idle, one to
        read) could straddle a redraw, where the prompt is erased to print a reply above it (a
        CI run read a transcript whose last prompt was the first command's so)."""
        deadline = time.monotonic() + timeout
        while not self._idle_in(lines := self.screen()):
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout:.0f} s for a fresh prompt:\n" + "\n".join(lines))
            time.sleep(0.05)
        last = max(i for i, line in enumerate(lines) if line.startswith(PROMPT))
        return lines[: last + 1]

    def idle(self) -> bool:
        """A fresh, empty prompt is the last prompt on the screen."""
        return self._idle_in(self.screen())

    def _idle_in(self, lines: list[str]) -> bool:
        prompts = [line for line in lines if line.startswith(PROMPT)]
        return bool(prompts) and prompts[-1] == PROMPT and len(prompts) == len(self.commands) + 1

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout:.0f} s for {what}:\n" + "\n".join(self.screen()))
            time.sleep(0.05)

    def run(self, command: str, timeout: float = WAIT_S) -> None:
        """Type a command and Enter, then wait for the fresh prompt that follows its output."""
        self.commands.append(command)
        self._tmux("send-keys", "-t", self.name, "-l", command)
        self._tmux("send-keys", "-t", self.name, "Enter")
        self.wait_for(self.idle, f"the prompt after {command!r}", timeout)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True, timeout=30)


def prompt_problems(lines: list[str], commands: list[str]) -> list[str]:
    """What is wrong with a transcript's prompts: every `bhandar>` must begin its line, each
    prompt line must hold exactly the next command typed (a long one continues on the lines
    below, as the prompt wraps it), and an empty prompt must end it."""
    problems = []
    typed = iter(commands)
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        if PROMPT in line and not line.startswith(PROMPT):
            problems.append(f"line {number}: a prompt inside a line: {line!r}")
        elif line.startswith(PROMPT) and number < len(lines):
            expected = f"{PROMPT} {next(typed, '(nothing more was typed)')}"
            while (
                line != expected
                and number < len(lines)
                and _squeezed(expected).startswith(_squeezed(line + lines[number]))
            ):
                line += lines[number]  # the prompt wrapped a long command (a space at the edge: rstrip)
                number += 1
            if _squeezed(line) != _squeezed(expected):
                problems.append(f"line {number}: {line!r} where the prompt and {expected!r} belong")
    if not lines or lines[-1] != PROMPT:
        problems.append(f"no fresh prompt at the end: {lines[-1:]!r}")
    return problems


def _squeezed(text: str) -> str:
    return text.replace(" ", "")
