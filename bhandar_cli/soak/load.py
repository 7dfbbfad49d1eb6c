"""The soak's clients: a mixed load on a process cluster, every operation recorded for the checker.

Each client is sequential (one request at a time, like one thread of an application) and goes
through the TCP backend, so what it records is exactly what the store answered: the chaos
checker's `History` (sim/history.py), judged at the end by the chaos checker. Like the chaos
workload (sim/chaos/workload.py), on a versioned keyspace it reads, remembers the context it got, and
writes with it (read, modify, write; now and then a blind put), deletes what it read, and on a
counter keyspace increments with request ids, retrying a failed increment with the same id. Every
put writes a value never written before, so the checker can follow each write. Writes go at
QUORUM; a few reads at ONE. A client picks a running node at random to coordinate.

Outcomes: acknowledged (the store said yes), failed (refused before anything was applied: the
node was down, too few replicas, bad input) and unknown (a timeout or a lost connection: it may
or may not have been applied; the checker allows both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from random import Random
from typing import Any

import trio

from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.model.errors import NOT_APPLIED
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import JSON, context_of
from bhandar_cli.core.protocol.messages import Failure, GetRequest, IncrRequest, PutRequest
from bhandar_cli.fleet.cluster_file import ClusterFileError
from bhandar_cli.sim.history import History, Operation

VERSIONED = KeyspaceDef("soak")
TALLY = KeyspaceDef("soak_tally", policy="counter")
KEYSPACES = (VERSIONED, TALLY)
WRITE_LEVEL = "QUORUM"
READ_LEVELS = ("QUORUM",) * 4 + ("ONE",)
DELTAS = (1, 1, 1, 2, 5, -1, -3)
MAX_ATTEMPTS = 4


def outcome_of(op: Operation) -> str:
    """acknowledged, failed (nothing applied) or unknown (maybe applied)."""
    if op.ok:
        return "acknowledged"
    return "failed" if op.code in NOT_APPLIED else "unknown"


@dataclass
class LoadStats:
    """What the clients did so far, for the live view and the summary."""

    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> outcome -> count
    latencies_ms: list[float] = field(default_factory=list)  # of acknowledged operations

    def record(self, op: Operation) -> None:
        by_outcome = self.outcomes.setdefault(op.kind, {"acknowledged": 0, "failed": 0, "unknown": 0})
        by_outcome[outcome_of(op)] += 1
        if op.ok:
            self.latencies_ms.append((op.completed - op.invoked) * 1000.0)

    @property
    def total(self) -> int:
        return sum(sum(c.values()) for c in self.outcomes.values())

    @property
    def acknowledged(self) -> int:
        return sum(c["acknowledged"] for c in self.outcomes.values())


class SoakClient:
    """One client: its own random stream, the contexts of its last reads, an increment to retry."""

    def __init__(
        self, index: int, backend: Any, history: History, stats: LoadStats, rng: Random, keys: int
    ) -> None:
        self.index = index
        self.backend = backend
        self.history = history
        self.stats = stats
        self.rng = rng
        self.keys = keys
        self.timeout = 5.0
        self.think = 0.02  # mean seconds between operations
        self.contexts: dict[str, dict[str, int]] = {}
        self.retry: Operation | None = None
        self._values = 0
        self._requests = 0

    async def run(self, stop: trio.Event) -> None:
        while not stop.is_set():
            await self.step()
            await trio.sleep(-self.think * math.log(1.0 - self.rng.random()))

    async def step(self) -> None:
        rng = self.rng
        if self.retry is not None:
            last = self.retry
            await self._incr(last.key, last.request_id, last.delta, last.attempt + 1)
            return
        key = f"k{int(self.keys * rng.random() ** 2)}"  # skewed: a few hot keys conflict
        roll = rng.random()
        if roll < 0.25:
            self._requests += 1
            delta = rng.choice(DELTAS)
            await self._incr(key, f"s{self.index}-{self._requests}", delta, 1)
            return
        context = self.contexts.get(key)
        if roll < 0.55 or (roll >= 0.9 and context is None):
            level = rng.choice(READ_LEVELS)
            op = self.history.invoke(trio.current_time(), self.index, "get", VERSIONED.name, key, level)
            await self._send(op, GetRequest(self.backend.new_rid(), VERSIONED.name, key, level))
            if op.ok and isinstance(op.record, Versioned):
                self.contexts[key] = context_of(op.record.siblings)
        elif roll < 0.9:
            if rng.random() < 0.2:
                context = None  # a blind put
            self._values += 1
            await self._write("put", key, f'"c{self.index}-{self._values}"'.encode(), context)
        else:
            await self._write("delete", key, None, context)

    async def _write(self, kind: str, key: str, value: bytes | None, context: dict[str, int] | None) -> None:
        ks = VERSIONED.name
        op = self.history.invoke(trio.current_time(), self.index, kind, ks, key, WRITE_LEVEL, value, context)
        await self._send(op, PutRequest(self.backend.new_rid(), ks, key, value, JSON, context, WRITE_LEVEL))

    async def _incr(self, key: str, request_id: str, delta: int, attempt: int) -> None:
        op = self.history.invoke(
            trio.current_time(),
            self.index,
            "incr",
            TALLY.name,
            key,
            WRITE_LEVEL,
            request_id=request_id,
            delta=delta,
            attempt=attempt,
        )
        request = IncrRequest(self.backend.new_rid(), TALLY.name, key, delta, request_id, WRITE_LEVEL)
        await self._send(op, request)
        # A failed increment is retried with its request id (the store must count it once).
        retry = not op.ok and attempt < MAX_ATTEMPTS and self.rng.random() < 0.8
        self.retry = op if retry else None

    async def _send(self, op: Operation, request: GetRequest | PutRequest | IncrRequest) -> None:
        backend = self.backend
        live = [name for name in backend.names if backend.is_alive(name)]
        if not live:
            History.fail(op, trio.current_time(), "fail", "unreachable")
        else:
            via = self.rng.choice(live)
            try:
                with trio.move_on_after(self.timeout + 1.0) as waited:  # the RPC has its own timeout
                    result = await backend.request(via, request, self.timeout)
                if waited.cancelled_caught:
                    History.fail(op, trio.current_time(), "timeout", "client_timeout")
                else:
                    History.complete(op, trio.current_time(), result)
            except ClusterFileError as exc:  # the node was retired between the pick and the send
                History.complete(op, trio.current_time(), Failure("unreachable", str(exc)))
        self.stats.record(op)
