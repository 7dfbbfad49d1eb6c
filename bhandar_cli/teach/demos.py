"""The classroom demos of `bhandar demo`, as data: what to say, what to type, what must happen.

This module owns the scripts only; `demo_runner.py` plays them on a live in-process cluster.

A demo is a list of steps. A step has narration (read aloud before the commands), one or more REPL
command lines, and expectations checked against the replies. The expectations are the point: a
demo that stops teaching its lesson because the store changed (a sibling no longer appears, a hint
is no longer stored) must fail loudly rather than show a room full of students the wrong thing.

Steps see what the cluster answered before them through a `DemoContext`, so "kill the second
replica of cart:7" is computed from the `prefs` reply and the demos work on any ring. Checks read
the documented JSON shapes of the replies (the man page's JSON OUTPUT), not the rendered tables.
"""

from __future__ import annotations

from bhandar_cli.teach.demo_kit import Demo, DemoContext, DemoError, Expect, Step, get_values, lines, text
from bhandar_cli.teach.demos_failures import HANDOFF, QUORUM, READREPAIR
from bhandar_cli.teach.demos_membership import JOIN
from bhandar_cli.teach.demos_versions import COUNTER, LWW, SIBLINGS, TOMBSTONE

DEMOS: dict[str, Demo] = {
    d.name: d for d in (SIBLINGS, QUORUM, HANDOFF, LWW, COUNTER, READREPAIR, TOMBSTONE, JOIN)
}

__all__ = [
    "DEMOS",
    "SIBLINGS",
    "Demo",
    "DemoContext",
    "DemoError",
    "Expect",
    "Step",
    "get_values",
    "lines",
    "text",
]
