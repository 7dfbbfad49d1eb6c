"""The client session: what one client remembers between its data operations, and how each
operation goes from request to outcome (client_session.py), with no I/O of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.core.session.client_session import (
        ClientSession,
        DataResult,
        Done,
        Exchange,
        Failed,
        SendRequest,
        Step,
    )

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = ["ClientSession", "DataResult", "Done", "Exchange", "Failed", "SendRequest", "Step"]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "ClientSession": "client_session",
            "DataResult": "client_session",
            "Done": "client_session",
            "Exchange": "client_session",
            "Failed": "client_session",
            "SendRequest": "client_session",
            "Step": "client_session",
        },
    )
