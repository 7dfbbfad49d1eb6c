"""The simulated network: latency, loss, duplication, reordering, partitions, slow nodes, clogs.

Latency follows the seed (1 ms + Exp(1) ms, and 3% of messages 40-80 ms later), plus per-node extra
delay. Reordering comes from independent per-message latencies. A partition blocks (src, dst)
pairs, so one-way partitions are just asymmetric sets; a clogged link holds messages until it is
restored. All randomness comes from one `random.Random` handed in by the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from random import Random
from typing import Any

from bhandar_cli.sim.loop import EventLoop

Deliver = Callable[[str, str, Any], None]  # (dst, src, message)


@dataclass
class LatencyModel:
    base_ms: float = 1.0
    mean_ms: float = 1.0  # exponential part
    spike_rate: float = 0.03
    spike_min_ms: float = 40.0
    spike_max_ms: float = 80.0

    def sample(self, rng: Random) -> float:
        ms = self.base_ms - self.mean_ms * math.log(1.0 - rng.random())
        if rng.random() < self.spike_rate:
            ms += self.spike_min_ms + (self.spike_max_ms - self.spike_min_ms) * rng.random()
        return ms / 1000.0


@dataclass
class SimNetwork:
    loop: EventLoop
    rng: Random
    deliver: Deliver
    latency: LatencyModel = field(default_factory=LatencyModel)
    loss: float = 0.0
    duplicate: float = 0.0
    blocked: set[tuple[str, str]] = field(default_factory=set)
    clogged: set[tuple[str, str]] = field(default_factory=set)
    extra_delay: dict[str, float] = field(default_factory=dict)  # seconds, per node
    sent: int = 0
    dropped: int = 0
    _held: dict[tuple[str, str], list[Any]] = field(default_factory=dict)

    def send(self, src: str, dst: str, msg: Any) -> None:
        self.sent += 1
        link = (src, dst)
        if link in self.blocked or (self.loss and self.rng.random() < self.loss):
            self.dropped += 1
            return
        if link in self.clogged:
            self._held.setdefault(link, []).append(msg)
            return
        self._schedule(src, dst, msg)
        if self.duplicate and self.rng.random() < self.duplicate:
            self._schedule(src, dst, msg)

    def _schedule(self, src: str, dst: str, msg: Any) -> None:
        # LatencyModel.sample and EventLoop.call_later, inlined: this runs for every message.
        rng, lat, loop = self.rng, self.latency, self.loop
        ms = lat.base_ms - lat.mean_ms * math.log(1.0 - rng.random())
        if rng.random() < lat.spike_rate:
            ms += lat.spike_min_ms + (lat.spike_max_ms - lat.spike_min_ms) * rng.random()
        delay = ms / 1000.0
        extra = self.extra_delay
        if extra:
            delay += extra.get(src, 0.0) + extra.get(dst, 0.0)
        loop.push(loop.now + delay, self._arrive, (src, dst, msg))

    def _arrive(self, src: str, dst: str, msg: Any) -> None:
        # A partition that started while the message was in flight drops it too.
        if (src, dst) in self.blocked:
            self.dropped += 1
            return
        self.deliver(dst, src, msg)

    # --- faults ------------------------------------------------------------------------------

    def partition(self, groups: Iterable[Iterable[str]], nodes: Iterable[str]) -> None:
        """Nodes in different groups cannot talk; nodes not listed form one more group."""
        group_of: dict[str, int] = {}
        listed = [list(g) for g in groups]
        for i, group in enumerate(listed):
            for node in group:
                group_of[node] = i
        everyone = list(nodes)
        for node in everyone:
            group_of.setdefault(node, len(listed))
        self.blocked = {(a, b) for a in everyone for b in everyone if group_of[a] != group_of[b]}

    def block_one_way(self, src: str, dst: str) -> None:
        self.blocked.add((src, dst))

    def heal(self) -> None:
        self.blocked.clear()
        for link in list(self.clogged):
            self.unclog(*link)

    def clog(self, src: str, dst: str) -> None:
        self.clogged.add((src, dst))

    def unclog(self, src: str, dst: str) -> None:
        self.clogged.discard((src, dst))
        for msg in self._held.pop((src, dst), []):
            self._schedule(src, dst, msg)
