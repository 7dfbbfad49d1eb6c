"""The REPL: command grammar, execution through client/client.py, and rich views."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.repl.batch import make_consoles, open_session, open_tcp_session, run_batch
    from bhandar_cli.repl.commands.data import TABLE
    from bhandar_cli.repl.interactive import InteractiveApp, run_interactive
    from bhandar_cli.repl.session import Reply, Session
    from bhandar_cli.repl.table import Command, CommandTable
    from bhandar_cli.repl.terminal import Terminal
    from bhandar_cli.repl.views import print_reply, render, reply_text
    from bhandar_cli.repl.views_cluster import one_table_each, state_text
    from bhandar_cli.repl.views_data import render_get, render_incr, render_write
    from bhandar_cli.repl.views_hot import render_hot
    from bhandar_cli.repl.views_ops import (
        add_counts,
        node_progress,
        render_config,
        render_upgrade,
        sources_down_lines,
    )

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "TABLE",
    "Command",
    "CommandTable",
    "InteractiveApp",
    "Reply",
    "Session",
    "Terminal",
    "add_counts",
    "make_consoles",
    "node_progress",
    "one_table_each",
    "open_session",
    "open_tcp_session",
    "print_reply",
    "render",
    "render_config",
    "render_get",
    "render_hot",
    "render_incr",
    "render_upgrade",
    "render_write",
    "reply_text",
    "run_batch",
    "run_interactive",
    "sources_down_lines",
    "state_text",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "Command": "table",
            "CommandTable": "table",
            "InteractiveApp": "interactive",
            "Reply": "session",
            "Session": "session",
            "TABLE": "commands.data",
            "Terminal": "terminal",
            "add_counts": "views_ops",
            "make_consoles": "batch",
            "node_progress": "views_ops",
            "one_table_each": "views_cluster",
            "open_session": "batch",
            "open_tcp_session": "batch",
            "print_reply": "views",
            "render": "views",
            "render_config": "views_ops",
            "render_get": "views_data",
            "render_hot": "views_hot",
            "render_incr": "views_data",
            "render_upgrade": "views_ops",
            "render_write": "views_data",
            "reply_text": "views",
            "run_batch": "batch",
            "run_interactive": "interactive",
            "sources_down_lines": "views_ops",
            "state_text": "views_cluster",
        },
    )
