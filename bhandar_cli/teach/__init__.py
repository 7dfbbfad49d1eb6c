"""The classroom demos as data, their runner and their narration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.teach.demo_runner import EndAware, demo_table, run_demo
    from bhandar_cli.teach.demos import DEMOS
    from bhandar_cli.teach.narration import Narration

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = ["DEMOS", "EndAware", "Narration", "demo_table", "run_demo"]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "DEMOS": "demos",
            "EndAware": "demo_runner",
            "Narration": "narration",
            "demo_table": "demo_runner",
            "run_demo": "demo_runner",
        },
    )
