"""The soak's fault schedule, drawn from its seed: crashes and restarts, partitions and heals, one
join and one decommission, one at a time, while the clients run.

Faults come one after another (a crash is over, its node restarted, before a partition starts):
each is a failure a cluster must ride out, and the checker's verdict stays about the store, not
about an operator who broke more than the replication factor allows at once. Gaps between faults
are exponential around `mean_gap`; a crash or partition lasts between `outage` seconds. The join
comes at about a third of the run and the decommission at about two thirds, of a node that was
there from the start (never the one that joined, so the ring both grows and shrinks).

Every fault goes through client/client.py like an operator's command (`kill`, `revive`, `partition`,
`heal`, `add`, `decommission`). A fault that could not be carried out (a restart that timed out) is
recorded as such and the schedule goes on; the end of the soak restarts whatever is still down.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from random import Random
from typing import TYPE_CHECKING

import trio

from bhandar_cli.core.model import BhandarError, ClientError
from bhandar_cli.fleet import ClusterFileError, StartError, next_free_name

if TYPE_CHECKING:
    from bhandar_cli.client import Client, TcpBackend

# Failures of a fault action: the cluster's state, not a bug of the soak.
FAULT_ERRORS = (BhandarError, ClientError, ClusterFileError, StartError, trio.TooSlowError)


@dataclass
class FaultLog:
    """Faults injected so far: counts by kind, the last one, when ring movements ran, what failed."""

    counts: dict[str, int] = field(default_factory=dict)
    last: str = ""
    errors: list[str] = field(default_factory=list)
    movements: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of join/decommission

    def note(self, kind: str, text: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.last = text


@dataclass(frozen=True)
class FaultTimes:
    mean_gap: float = 6.0  # seconds between faults, on average
    outage: tuple[float, float] = (2.0, 6.0)  # how long a crash or partition lasts
    settle: float = 5.0  # after a movement, stale reads are still the movement's (sim/checker)


class FaultSchedule:
    def __init__(
        self, client: Client[TcpBackend], rng: Random, log: FaultLog, times: FaultTimes = FaultTimes()
    ) -> None:
        self.client = client
        self.rng = rng
        self.log = log
        self.times = times
        self.original = list(client.backend.names)

    async def run(self, seconds: float) -> None:
        """Inject faults for `seconds`. The fault in progress at the end finishes, and the join and
        the decommission always happen: a fault before them may push them past the end."""
        start = trio.current_time()
        end = start + seconds
        movements: list[tuple[float, Callable[[], Awaitable[None]]]] = [
            (start + seconds * (0.25 + 0.15 * self.rng.random()), self._join),
            (start + seconds * (0.6 + 0.15 * self.rng.random()), self._decommission),
        ]
        next_fault = start + self._gap()
        while movements or next_fault < end:
            if movements and (movements[0][0] <= next_fault or next_fault >= end):
                at, action = movements.pop(0)
            else:
                at, action = next_fault, self._crash if self.rng.random() < 0.5 else self._partition
                next_fault = max(at, trio.current_time()) + self._gap()
            await trio.sleep_until(at)
            await self._attempt(action)

    def _gap(self) -> float:
        return -self.times.mean_gap * math.log(1.0 - self.rng.random())

    def _outage(self) -> float:
        lo, hi = self.times.outage
        return lo + (hi - lo) * self.rng.random()

    async def _attempt(self, action: Callable[[], Awaitable[None]]) -> None:
        try:
            await action()
        except FAULT_ERRORS as exc:
            self.log.errors.append(f"{action.__name__.strip('_')}: {exc}")

    def _live(self) -> list[str]:
        backend = self.client.backend
        return [n for n in backend.names if backend.is_alive(n)]

    async def _crash(self) -> None:
        victim = self.rng.choice(self._live())
        await self.client.admin.kill(victim)
        self.log.note("kill", f"killed {victim} (SIGKILL)")
        await trio.sleep(self._outage())
        await self.client.admin.revive(victim)
        self.log.note("restart", f"restarted {victim}")

    async def _partition(self) -> None:
        names = self._live()
        self.rng.shuffle(names)
        cut = 1 + int(self.rng.random() * (len(names) // 2))  # a minority of 1 .. half the nodes
        groups = [sorted(names[:cut]), sorted(names[cut:])]
        await self.client.admin.partition(groups)
        shown = " | ".join(" ".join(g) for g in groups)
        self.log.note("partition", f"partitioned {shown}")
        await trio.sleep(self._outage())
        await self.client.admin.heal()
        self.log.note("heal", "healed")

    async def _join(self) -> None:
        name = next_free_name(self.client.backend.cluster)
        async with self._movement():
            await self.client.admin.add(name)
        self.log.note("join", f"{name} joined")

    async def _decommission(self) -> None:
        backend = self.client.backend
        if len(backend.names) <= backend.cluster.replicas:
            held = f"{len(backend.names)} nodes for N={backend.cluster.replicas}"
            self.log.errors.append(f"decommission skipped: {held}")
            return
        candidates = [n for n in self._live() if n in self.original]
        victim = self.rng.choice(candidates)
        async with self._movement():
            await self.client.admin.decommission(victim)
        self.log.note("decommission", f"{victim} decommissioned")

    @asynccontextmanager
    async def _movement(self) -> AsyncIterator[None]:
        """Record the window of a ring movement (plus settling), whether it finished or failed."""
        started = trio.current_time()
        try:
            yield
        finally:
            self.log.movements.append((started, trio.current_time() + self.times.settle))
