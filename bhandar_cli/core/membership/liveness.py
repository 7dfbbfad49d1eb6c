"""Who is up, as far as one node can tell: the interface routing uses, and a ping detector.

Up/down only decides routing (whom to ask, where to leave hints); it never changes who owns what.
`PingLiveness` pings every peer each interval and calls a peer down when it has heard nothing from
it for `down_after` seconds; any message from the peer counts as a sign of life, so it is up again
as soon as it answers. Gossip with phi accrual (gossip.py) is the default behind the same
interface; pings remain for experiments that model detection as a fixed delay (`liveness="ping"`,
the seed's ministore scenario).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from bhandar_cli.core.protocol import Effect, Ping, Pong, Send


class Liveness(Protocol):
    def is_up(self, peer: str, now: float) -> bool: ...
    def heard_from(self, peer: str, now: float) -> None: ...
    def handle(self, now: float, src: str, msg: object) -> list[Effect] | None: ...
    def tick(self, now: float) -> list[Effect]: ...
    def next_deadline(self) -> float: ...
    def add_peer(self, peer: str, now: float) -> None: ...


class PingLiveness:
    """Periodic pings; a peer silent for `down_after` seconds is down until it speaks again."""

    def __init__(
        self, me: str, peers: Iterable[str], now: float, interval: float = 0.5, down_after: float = 1.5
    ) -> None:
        self.me = me
        self.interval = interval
        self.down_after = down_after
        # A node just started assumes its peers are up, as a freshly booted Dynamo node would.
        self.last_heard: dict[str, float] = {p: now for p in peers if p != me}
        self._next_ping = now
        self._seq = 0

    def add_peer(self, peer: str, now: float) -> None:
        if peer != self.me:
            self.last_heard.setdefault(peer, now)

    def is_up(self, peer: str, now: float) -> bool:
        if peer == self.me:
            return True
        heard = self.last_heard.get(peer)
        return heard is not None and now - heard <= self.down_after

    def heard_from(self, peer: str, now: float) -> None:
        if peer in self.last_heard and self.last_heard[peer] < now:
            self.last_heard[peer] = now

    def handle(self, now: float, src: str, msg: object) -> list[Effect] | None:
        if isinstance(msg, Ping):
            return [Send(src, Pong(msg.seq))]
        if isinstance(msg, Pong):
            return []
        return None

    def tick(self, now: float) -> list[Effect]:
        if now < self._next_ping:
            return []
        self._next_ping = now + self.interval
        self._seq += 1
        return [Send(peer, Ping(self._seq)) for peer in self.last_heard]

    def next_deadline(self) -> float:
        return self._next_ping
