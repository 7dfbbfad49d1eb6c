"""The in-memory network between in-process nodes: latency, partitions and per-node delay on trio.

Messages wait in one heap ordered by delivery time; a single task sleeps until the next delivery,
so thousands of messages in flight cost no tasks. Partitions are checked when a message is sent
and again when it arrives, as on a real network where a cable pulled mid-flight loses the packet.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from random import Random
from typing import Any

import trio

from bhandar_cli.sim.network import LatencyModel

Deliver = Callable[[str, str, Any], bool]  # (dst, src, message) -> accepted


class MemoryNetwork:
    def __init__(self, rng: Random, latency: LatencyModel | None = None) -> None:
        self.rng = rng
        self.latency = latency if latency is not None else LatencyModel()
        self.blocked: set[tuple[str, str]] = set()
        self.extra_delay: dict[str, float] = {}
        self.groups: list[list[str]] = []
        self.sent = 0
        self.dropped = 0
        self._heap: list[tuple[float, int, str, str, Any]] = []
        self._seq = 0
        self._wakeup = trio.Event()
        self._deliver: Deliver = lambda _dst, _src, _msg: False

    def attach(self, deliver: Deliver) -> None:
        self._deliver = deliver

    def send(self, src: str, dst: str, msg: Any) -> None:
        self.sent += 1
        if (src, dst) in self.blocked:
            self.dropped += 1
            return
        extra = self.extra_delay.get(src, 0.0) + self.extra_delay.get(dst, 0.0)
        delay = self.latency.sample(self.rng) + extra
        self._seq += 1
        when = trio.current_time() + delay
        if not self._heap or when < self._heap[0][0]:
            self._wakeup.set()
        heapq.heappush(self._heap, (when, self._seq, src, dst, msg))

    async def run(self) -> None:
        """Deliver messages when they are due; runs until cancelled."""
        while True:
            if self._heap:
                with trio.move_on_at(self._heap[0][0]):
                    await self._wakeup.wait()
            else:
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            now = trio.current_time()
            heap = self._heap
            while heap and heap[0][0] <= now:
                _, _, src, dst, msg = heapq.heappop(heap)
                if (src, dst) in self.blocked or not self._deliver(dst, src, msg):
                    self.dropped += 1

    def partition(self, groups: Iterable[Iterable[str]], nodes: Iterable[str]) -> list[list[str]]:
        """Separate the groups; nodes not listed form one more group. Returns the groups."""
        listed = [list(g) for g in groups]
        everyone = list(nodes)
        rest = [n for n in everyone if not any(n in g for g in listed)]
        if rest:
            listed.append(rest)
        group_of = {n: i for i, g in enumerate(listed) for n in g}
        self.blocked = {(a, b) for a in everyone for b in everyone if group_of[a] != group_of[b]}
        self.groups = listed
        return listed

    def block_one_way(self, src: str, dst: str) -> None:
        self.blocked.add((src, dst))
        self.groups = []

    def heal(self) -> None:
        self.blocked.clear()
        self.groups = []
