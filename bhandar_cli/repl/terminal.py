"""The interactive REPL's one path to the screen: every reply, notice, banner and line echoed from
the web page's command box is printed through a `Terminal`, which keeps the prompt intact.

Two threads print: trio's (replies, notices, the page's commands) and the prompt's (the banner).
While a prompt is shown, prompt_toolkit owns the last lines of the screen. So:

- while no prompt is shown (a command runs; the prompt thread waits for it), text is written at
  once, in order, before the command returns: the next prompt is drawn below it;
- while a prompt is shown, text is queued and handed to the prompt's event loop, which erases the
  prompt, writes it and draws the prompt again below it (prompt_toolkit's `run_in_terminal`); if
  the prompt ends before that runs, the prompt thread writes what is queued as it ends, first.

`patch_stdout` alone did this with a background thread that flushed on its own schedule, so a
reply could land after the next prompt was drawn, on its line (`bhandar> killed C`).

Every renderable is rendered to text at the terminal's width when it is printed, so long lines
are wrapped by rich, at words, not by the terminal in the middle of one.
"""

from __future__ import annotations

import io
import shutil
import sys
import threading
from typing import IO, Any

from prompt_toolkit.application import Application, run_in_terminal
from rich.console import Console, RenderableType


class Terminal:
    def __init__(self, stream: IO[str] | None = None, width: int | None = None) -> None:
        self._stream = stream  # None: the process's real standard output, found when printing
        self._width = width  # None: the terminal's width, found when printing
        self._lock = threading.Lock()
        self._app: Application[Any] | None = None  # the prompt on screen, if one is
        self._queue: list[str] = []

    @property
    def stream(self) -> IO[str]:
        stream = self._stream or sys.__stdout__
        assert stream is not None, "no standard output to print to"
        return stream

    def width(self) -> int:
        return self._width or shutil.get_terminal_size((100, 24)).columns

    def render(self, renderable: RenderableType) -> str:
        """The renderable as the terminal shows it: wrapped to its width, coloured on a terminal."""
        out = io.StringIO()
        tty = self.stream.isatty()
        Console(file=out, width=self.width(), force_terminal=tty, color_system="auto" if tty else None).print(
            renderable
        )
        return out.getvalue()

    def print(self, renderable: RenderableType) -> None:
        self.write(self.render(renderable))

    def write(self, text: str) -> None:
        """Write text (whole lines) from any thread, above the prompt if one is shown."""
        with self._lock:
            app = self._app
            if app is None:
                self._out(text)
                return
            self._queue.append(text)
            loop = app.loop
        if loop is not None:
            loop.call_soon_threadsafe(self._above_prompt)

    # --- called by the prompt thread --------------------------------------------------------------

    def prompt_started(self, app: Application[Any]) -> None:
        """The prompt's `pre_run`: in its event loop, before it is drawn."""
        with self._lock:
            self._app = app
            self._drain()

    def prompt_ended(self) -> None:
        """After the prompt returned (or raised): what is still queued is written now, in order."""
        with self._lock:
            self._app = None
            self._drain()

    # --- internals ----------------------------------------------------------------------------------

    def _above_prompt(self) -> None:
        run_in_terminal(self._drain_locked, in_executor=False)

    def _drain_locked(self) -> None:
        with self._lock:
            self._drain()

    def _drain(self) -> None:
        queued, self._queue = self._queue, []
        for text in queued:
            self._out(text)

    def _out(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
