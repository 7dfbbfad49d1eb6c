"""The `bhandar` command line: the typer app (app.py), its entry point (launch.py, which runs a
one-shot data command without typer) and one module per command group (`*_cmd.py`). Each command
parses, calls the client and renders."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.cli.launch import main

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = ["main"]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(__name__, {"main": "launch"})
