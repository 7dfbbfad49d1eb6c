"""Who may speak as which node on a node's peer port: the checks between a connection and the core.

The core trusts the `src` the transport hands it, and gossip, replica writes and schema updates
change what a node stores and whom it believes in. So over TLS a connection opening with
`{"hello": "peer", "id": X}` is let through only if its verified certificate names X (pki's node
certificates carry the node id); afterwards, a message that names its own sender inside (a joiner
asking for its data) must name X too. Messages *about* other nodes (gossip relays everyone's
state) are not refused: only the sender's claim about itself is checked. A node the membership
knows as decommissioned is not heard from again, whatever it shows.

Each refusal is logged with both names and counted by reason (`info`'s transport section and the
`bhandar_peer_rejections` metric).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from bhandar_cli.core.roles import StreamRequest
from bhandar_cli.security.refusal_log import RefusalLog

log = logging.getLogger("bhandar.peers")
_refusals = RefusalLog(log)  # one line per source per interval, with a count (refusal_log.py)

REASONS = ("handshake", "no-certificate", "identity", "sender", "decommissioned", "protocol")


class PeerRefused(Exception):
    """A connection or message this node will not take from its sender (the sender's fault)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def claimed_sender(msg: Any) -> str | None:
    """The node a message says sent it, if it says so (None: it names no sender of its own)."""
    if isinstance(msg, StreamRequest):
        return msg.joiner.id
    return None


class PeerGate:
    """The peer port's admission rules. `tls`: connections carry verified certificates;
    `decommissioned(id)`: whether the membership knows `id` as left (set by the node process)."""

    def __init__(self, me: str, tls: bool, decommissioned: Callable[[str], bool] = lambda _id: False) -> None:
        self.me = me
        self.tls = tls
        self.decommissioned = decommissioned
        self.rejections = dict.fromkeys(REASONS, 0)

    def refuse(self, reason: str, message: str, where: str) -> PeerRefused:
        """Count and log a refusal; returns the exception for the caller to raise."""
        self.rejections[reason] += 1
        _refusals.refused(where, reason, f"refused {where}: {message}")
        return PeerRefused(reason, message)

    def admit_hello(self, claimed: str, certified: str | None, where: str) -> None:
        """Raise PeerRefused unless a connection from `where` may speak as node `claimed`."""
        if self.tls and certified is None:
            raise self.refuse("no-certificate", f"a peer hello as {claimed} without a certificate", where)
        if self.tls and certified != claimed:
            raise self.refuse(
                "identity", f"the certificate of node {certified} claims to be node {claimed}", where
            )
        if self.decommissioned(claimed):
            raise self.refuse("decommissioned", f"node {claimed} was decommissioned", where)

    def admit_message(self, src: str, msg: Any, where: str) -> None:
        """Raise PeerRefused unless `msg` may come from node `src` (the connection's node)."""
        sender = claimed_sender(msg)
        if sender is not None and sender != src:
            raise self.refuse(
                "sender", f"node {src} sent a {type(msg).__name__} in the name of node {sender}", where
            )
        if self.decommissioned(src):
            raise self.refuse("decommissioned", f"node {src} was decommissioned", where)
