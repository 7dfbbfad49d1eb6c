"""How many messages a check's network carried, Maelstrom's way (its net checker's statistics):
for all messages, those to or from a client, and those between servers (nodes and services),
the sends, the receives, the distinct messages, and the messages per operation.

A client is any id `c<number>`. The harness's own messages (`init` from `c0`) are not counted:
they are no operation's. A message sent twice (a duplicated request) is one message and two
sends; a receive is a delivery, so a message lost or sent to a node that is down is sent and not
received. The
operations are every operation of the history (final reads and their retries too), as Maelstrom
counts every invocation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CLIENT = re.compile(r"c\d+")
GROUPS = ("all", "clients", "servers")
HARNESS = "c0"  # the harness's id (check/router.py's HARNESS)


@dataclass(slots=True)
class MessageCounts:
    send_count: int = 0
    recv_count: int = 0
    msg_count: int = 0


class NetStats:
    """Counted as the router sends and delivers (not from the journal, which has a cap)."""

    def __init__(self) -> None:
        self.clients = MessageCounts()
        self.servers = MessageCounts()

    def _group(self, src: str, dest: str) -> MessageCounts:
        return self.clients if CLIENT.fullmatch(src) or CLIENT.fullmatch(dest) else self.servers

    def sent(self, src: str, dest: str, copies: int = 1) -> None:
        if HARNESS in (src, dest):
            return
        tally = self._group(src, dest)
        tally.msg_count += 1
        tally.send_count += copies

    def received(self, src: str, dest: str) -> None:
        if HARNESS in (src, dest):
            return
        self._group(src, dest).recv_count += 1

    def plain(self, ops: int) -> dict[str, dict[str, float | int | None]]:
        """{all|clients|servers: {send_count, recv_count, msg_count, msgs_per_op}}; msgs_per_op is
        null when there were no operations."""
        every = MessageCounts(
            self.clients.send_count + self.servers.send_count,
            self.clients.recv_count + self.servers.recv_count,
            self.clients.msg_count + self.servers.msg_count,
        )
        out: dict[str, dict[str, float | int | None]] = {}
        for name, tally in zip(GROUPS, (every, self.clients, self.servers), strict=True):
            out[name] = {
                "send_count": tally.send_count,
                "recv_count": tally.recv_count,
                "msg_count": tally.msg_count,
                "msgs_per_op": round(tally.msg_count / ops, 3) if ops else None,
            }
        return out
