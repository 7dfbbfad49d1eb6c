"""The notes a node process made, kept for a REPL on the process cluster (`repl --connect`).

An in-process cluster hands its nodes' notes (a peer seen down or up, a join finished) straight
to the REPL. A node process keeps its last few hundred in a `NoteLog`, numbered from 0, and answers
the `notes` RPC with those after a reader's cursor. Each log has a random boot id: a cursor from
before a restart means nothing, so a reader whose boot id differs gets everything the log holds.
The log is bounded: a reader that falls further behind than it holds misses the oldest notes,
and the answer says how many. `NoteReader` is the other end: a session's cursors on every log.
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import trio

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


Note = tuple[str, dict[str, Any], str]  # (text, data, node), as the REPL's notices fold them
ReadLog = Callable[[str, int, str], Awaitable[dict[str, Any] | None]]  # (node, since, boot) -> answer


class NoteReader:
    """A session's cursors on the note logs of node processes, read through `read` (an RPC that
    answers `NoteLog.since`, or None when the node does not answer)."""

    def __init__(self, read: ReadLog) -> None:
        self._read = read
        self._cursors: dict[str, tuple[str, int]] = {}  # node -> (boot id, next note)
        self._primed = False

    async def drain(self, nodes: list[str]) -> list[Note]:
        """What `nodes` noted since the last call, asked of all at once. The first call only
        learns where each log stands: a session hears what happens from then on. A node first
        heard of later, or restarted since (a new boot id), tells everything it noted since it
        started."""
        found: list[Note] = []
        priming, self._primed = not self._primed, True

        async def one(name: str) -> None:
            boot, since = self._cursors.get(name, ("", 0))
            answer = await self._read(name, since, boot)
            if answer is None:
                return
            self._cursors[name] = (str(answer["boot"]), int(answer["next"]))
            if not priming:
                found.extend((str(text), dict(data), name) for text, data in answer["notes"])

        async with trio.open_nursery() as nursery:
            for name in nodes:
                nursery.start_soon(one, name)
        return found
