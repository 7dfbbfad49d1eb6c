"""The chaos checker: what a history of client operations must satisfy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.sim.checker.check import check_history, count_stale_reads

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = ["check_history", "count_stale_reads"]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(__name__, {"check_history": "check", "count_stale_reads": "check"})
