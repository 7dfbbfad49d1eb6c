"""Membership of a process cluster by seeds, until gossip replaces it (behind the same calls).

A node starts knowing only itself and its seeds' addresses. It says hello to the seeds (an RPC
`join` carrying its id, host, port, HTTP port and zone) and learns their member lists; then every
`interval` it re-announces the members it knows to all of them, so a node that joined through one
seed is soon known everywhere. A restarted node comes back with a higher incarnation (its start
time), so its new entry wins over the old one wherever they meet.

Whenever the member set changes, `on_change` gets the new table: the node rebuilds its ring and
tells its liveness detector and its transport about the new peers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import trio

from bhandar_cli.core.wire import register
from bhandar_cli.node.rpc import RpcError, rpc_once

log = logging.getLogger("bhandar.discovery")

ANNOUNCE_INTERVAL = 0.5
JOIN_RETRY = 0.5


@register
@dataclass(frozen=True, slots=True)
class Member:
    id: str
    host: str
    port: int
    http_port: int
    zone: str
    incarnation: int = 0


@register
@dataclass(frozen=True, slots=True)
class MemberList:
    """Everything the sender knows about the cluster's members (an announcement)."""

    members: tuple[Member, ...]


def member_from_plain(plain: Any) -> Member:
    """A member from an RPC argument, checked (it comes from the network)."""
    if not isinstance(plain, dict):
        raise ValueError("a member must be a map")
    try:
        member = Member(**plain)
    except TypeError as exc:
        raise ValueError(f"malformed member: {exc}") from exc
    if not (isinstance(member.id, str) and member.id and isinstance(member.host, str)):
        raise ValueError("a member needs an id and a host")
    if not all(
        isinstance(v, int) and 0 <= v < 2**63 for v in (member.port, member.http_port, member.incarnation)
    ):
        raise ValueError("member ports and incarnation must be integers")
    return member


class Discovery:
    """One node's view of who is in the cluster."""

    def __init__(
        self,
        me: Member,
        seeds: Iterable[tuple[str, int]],
        send: Callable[[str, str, Any], None],
        on_change: Callable[[dict[str, Member]], None],
        interval: float = ANNOUNCE_INTERVAL,
    ) -> None:
        self.me = me
        self.seeds = [s for s in seeds if s != (me.host, me.port)]
        self.send = send
        self.on_change = on_change
        self.interval = interval
        self.members: dict[str, Member] = {me.id: me}
        self.joined = not self.seeds

    def merge(self, members: Iterable[Member]) -> bool:
        """Take newer entries; True (and `on_change` called) if the table changed."""
        changed = False
        for member in members:
            if member.id == self.me.id:
                continue  # nobody knows better than this node where it is
            known = self.members.get(member.id)
            if known is None or member.incarnation > known.incarnation:
                self.members[member.id] = member
                changed = True
        if changed:
            log.info("members now %s", ", ".join(sorted(self.members)))
            self.on_change(dict(self.members))
        return changed

    def handle(self, src: str, msg: Any) -> bool:
        """A peer message; True if it was membership (and so consumed here)."""
        if isinstance(msg, MemberList):
            self.merge(msg.members)
            return True
        return False

    def join_request(self, plain: Any) -> list[dict[str, Any]]:
        """The seed's side of a hello: learn the newcomer, answer with every member known."""
        self.merge([member_from_plain(plain)])
        return [asdict(m) for m in self.members.values()]

    async def run(self) -> None:
        """Join through the seeds, then announce forever (until cancelled)."""
        while not self.joined:
            await self._join()
            if not self.joined:
                await trio.sleep(JOIN_RETRY)
        while True:
            self.announce()
            await trio.sleep(self.interval)

    async def _join(self) -> None:
        for host, port in self.seeds:
            try:
                plain = await rpc_once(host, port, "join", 1.0, f"seed {host}:{port}", member=asdict(self.me))
                self.merge(member_from_plain(p) for p in plain)
            except (RpcError, trio.TooSlowError, ValueError, TypeError) as exc:
                log.info("seed %s:%d did not take the hello: %s", host, port, exc)
                continue
            self.joined = True

    def announce(self) -> None:
        table = MemberList(tuple(self.members.values()))
        for peer in self.members:
            if peer != self.me.id:
                self.send(self.me.id, peer, table)
