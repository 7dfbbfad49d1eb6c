"""The notes a node process made, kept for a REPL on the process cluster (`repl --connect`).

An in-process cluster hands its nodes' notes (a peer seen down or up, a join finished) straight
to the REPL. A node process keeps its last few hundred in a `NoteLog`, numbered from 0, and answers
the `notes` RPC with those after a reader's cursor. Each log has a random boot id: a cursor from
before a restart means nothing, so a reader whose boot id differs gets everything the log holds.
The log is bounded: a reader that falls further behind than it holds misses the oldest notes,
and the answer says how many.
"""

from __future__ import annotations

import secrets
from collections import deque
from typing import Any

CAPACITY = 512


class NoteLog:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self.boot = secrets.token_hex(8)
        self._notes: deque[tuple[int, str, dict[str, Any]]] = deque(maxlen=capacity)
        self._next = 0

    def append(self, text: str, data: dict[str, Any]) -> None:
        self._notes.append((self._next, text, dict(data)))
        self._next += 1

    def since(self, seq: int, boot: str) -> dict[str, Any]:
        """The notes from `seq` on, if `boot` is this log's boot id; else every note it holds.
        `next` is the cursor to ask with next time, `missed` how many were dropped unread."""
        start = seq if boot == self.boot else 0
        oldest = self._notes[0][0] if self._notes else self._next
        return {
            "boot": self.boot,
            "next": self._next,
            "missed": max(0, oldest - start),
            "notes": [[text, data] for n, text, data in self._notes if n >= start],
        }
