"""The live web view of a cluster (bhandar web): a state snapshot, a server, a page."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.web.background import serve_in_background
    from bhandar_cli.web.demo_page import WebPage
    from bhandar_cli.web.server import WebServer

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = ["WebPage", "WebServer", "serve_in_background"]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__, {"WebPage": "demo_page", "WebServer": "server", "serve_in_background": "background"}
    )
