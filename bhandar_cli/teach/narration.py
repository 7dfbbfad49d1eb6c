"""What a classroom demo has said and checked so far, as JSON: the web view's Narration panel.

The demo runner (`demo_runner.py`) tells a `Narration` each thing it prints (a step's narration,
its commands, each expectation ticked or crossed, the conclusion, how the demo ended); listeners
(the web view's state, `web/state.py`) receive a fresh copy after each change. The terminal stays
the runner's: this only mirrors it, so a page and a terminal show the same demo.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

Listener = Callable[[dict[str, Any]], None]

# How the demo stands: "ready" (no step run yet), "running" (a step's commands), "passed" (the
# step's expectations held; the next waits), "failed" (an expectation or command did not), "done"
# (every step passed), "stopped" (q or Ctrl-C before the end).
STATES = ("ready", "running", "passed", "failed", "done", "stopped")


class Narration:
    def __init__(self, name: str, title: str, summary: str, total: int) -> None:
        self.view: dict[str, Any] = {
            "name": name,
            "title": title,
            "summary": summary,
            "steps": total,
            "step": 0,  # the step shown (1-based); 0 before the first
            "state": "ready",
            "say": "",
            "commands": [],
            "checks": [],  # {"ok": bool, "text": "✓ ..." or "✗ expected ..., but ..."}
            "then": "",
            "failure": "",
        }
        self.listeners: list[Listener] = []

    def _changed(self) -> None:
        for listener in self.listeners:
            listener(copy.deepcopy(self.view))

    def step(self, number: int, say: str) -> None:
        self.view.update(step=number, state="running", say=say, commands=[], checks=[], then="", failure="")
        self._changed()

    def command(self, line: str) -> None:
        self.view["commands"].append(line)
        self._changed()

    def check(self, ok: bool, text: str) -> None:
        self.view["checks"].append({"ok": ok, "text": text})
        self._changed()

    def conclude(self, then: str) -> None:
        self.view["then"] = then
        self._changed()

    def end(self, state: str, failure: str = "") -> None:
        """A step passed, or the demo ended: done, failed (with why) or stopped."""
        if state not in STATES:
            raise ValueError(f"a demo's state is one of {STATES}, not {state!r}")
        self.view.update(state=state, failure=failure)
        self._changed()
