"""The trio node runtime: a node's lives on trio (runtime.py), a node process (process.py) with its
RPC service, admin views and timers; the wire in net/, the HTTP gateway in http/."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

# mypyc's build (setup.py) type-checks the compiled modules and every package above them, and sets
# COMPILING (mypy's --always-true): this face, a parent of the compiled codec, then leaves its trio
# modules out of a build environment that has no trio.
COMPILING = False
if TYPE_CHECKING and not COMPILING:
    from bhandar_cli.node.admin import (
        convergence_problems,
        convergence_ranges,
        metrics_from_plain,
        node_info,
        records_from_plain,
    )
    from bhandar_cli.node.epoch_clock import EpochClock
    from bhandar_cli.node.exposure import ListenRefused, is_loopback
    from bhandar_cli.node.join import JoinUnreachable, join_once
    from bhandar_cli.node.maelstrom import run_maelstrom_node
    from bhandar_cli.node.node_options import NodeOptions
    from bhandar_cli.node.note_log import NoteReader
    from bhandar_cli.node.process import NodeCrashed, run_node
    from bhandar_cli.node.reconfigure import apply_live
    from bhandar_cli.node.runtime import FATAL, NodeRunner, call
    from bhandar_cli.node.timers import TrioTimers

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "FATAL",
    "EpochClock",
    "JoinUnreachable",
    "ListenRefused",
    "NodeCrashed",
    "NodeOptions",
    "NodeRunner",
    "NoteReader",
    "TrioTimers",
    "apply_live",
    "call",
    "convergence_problems",
    "convergence_ranges",
    "is_loopback",
    "join_once",
    "metrics_from_plain",
    "node_info",
    "records_from_plain",
    "run_maelstrom_node",
    "run_node",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "EpochClock": "epoch_clock",
            "FATAL": "runtime",
            "JoinUnreachable": "join",
            "ListenRefused": "exposure",
            "NodeCrashed": "process",
            "NodeOptions": "node_options",
            "NodeRunner": "runtime",
            "NoteReader": "note_log",
            "TrioTimers": "timers",
            "apply_live": "reconfigure",
            "call": "runtime",
            "convergence_problems": "admin",
            "convergence_ranges": "admin",
            "is_loopback": "exposure",
            "join_once": "join",
            "metrics_from_plain": "admin",
            "node_info": "admin",
            "records_from_plain": "admin",
            "run_maelstrom_node": "maelstrom",
            "run_node": "process",
        },
    )
