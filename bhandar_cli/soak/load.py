"""The soak's clients: a mixed load on a process cluster, every operation recorded for the checker.

Each client is sequential (one request at a time, like one thread of an application) and goes
through the TCP backend, so what it records is exactly what the store answered: the chaos
checker's `History` (sim/history.py), judged at the end by the chaos checker. Like the chaos
workload (sim/chaos/workload.py), each client drives a client session (core/session/
client_session.py, the code the data client runs): on a versioned keyspace it reads, and the
session remembers the context it got and writes with it (read, modify, write; now and then a blind
put), deletes what it read (reading first when it has no context: that read is a get of the
history), and on a counter keyspace increments with request ids, retrying a failed increment with
the same id. Every put writes a value never written before, so the checker can follow each write.
Writes go at QUORUM; a few reads at ONE. Half the time a client names a running node at random to
coordinate; else the session chooses the key's first live replica, and goes around a failed one.

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

from bhandar_cli.core.model import JSON, NOT_APPLIED, KeyspaceDef
from bhandar_cli.core.protocol import Failure, GetResult, IncrResult, PutRequest, PutResult, Result
from bhandar_cli.core.session import ClientSession, DataResult, Done, Exchange, SendRequest, Step
from bhandar_cli.fleet import ClusterFileError
from bhandar_cli.sim import History, Operation

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
    """One client: its own random stream, its session (the contexts of its last reads), an
    increment to retry."""

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
        self.session = ClientSession(backend.new_rid)
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
        ks = VERSIONED.name
        via = self._via()
        if roll < 0.55:
            level = rng.choice(READ_LEVELS)
            op = self.history.invoke(trio.current_time(), self.index, "get", ks, key, level)
            await self._drive(op, self.session.get(ks, key, level=level, via=via))
        elif roll < 0.9:
            context = "none" if rng.random() < 0.2 else "auto"  # a blind put, else read-modify-write
            self._values += 1
            value = f'"c{self.index}-{self._values}"'.encode()
            exchange = self.session.put(ks, key, value, JSON, context=context, level=WRITE_LEVEL, via=via)
            op = self.history.invoke(trio.current_time(), self.index, "put", ks, key, WRITE_LEVEL, value)
            await self._drive(op, exchange)
        else:
            exchange = self.session.delete(ks, key, level=WRITE_LEVEL, via=via)
            kind = "get" if exchange.then_delete else "delete"
            op = self.history.invoke(trio.current_time(), self.index, kind, ks, key, WRITE_LEVEL)
            await self._drive(op, exchange)

    def _via(self) -> str | None:
        """Half the time a running node picked at random; else the session chooses (None)."""
        if self.rng.random() < 0.5:
            return None
        live = [name for name in self.backend.names if self.backend.is_alive(name)]
        return self.rng.choice(live) if live else None

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
        exchange = self.session.incr(TALLY.name, key, delta, request_id, level=WRITE_LEVEL, via=self._via())
        await self._drive(op, exchange)
        # A failed increment is retried with its request id (the store must count it once).
        retry = not op.ok and attempt < MAX_ATTEMPTS and self.rng.random() < 0.8
        self.retry = op if retry else None

    async def _drive(self, op: Operation, exchange: Exchange) -> None:
        """Run the session's operation, recording it (and a delete's read, as a get) in the history."""
        step: Step = exchange.start(self.backend)
        while isinstance(step, SendRequest):
            if isinstance(step.request, PutRequest) and op.kind in ("put", "delete"):
                op.context = step.request.context
            result = await self._request(op, step)
            if result is None:  # the client gave up waiting
                self.stats.record(op)
                return
            step = exchange.receive(result, self.backend)
            if isinstance(step, SendRequest) and op.kind == "get" and isinstance(step.request, PutRequest):
                History.complete(op, trio.current_time(), result)  # a delete's read: then the delete
                self.stats.record(op)
                now = trio.current_time()
                op = self.history.invoke(now, self.index, "delete", op.keyspace, op.key, op.level)
        History.complete(op, trio.current_time(), step.result if isinstance(step, Done) else step.failure)
        self.stats.record(op)

    async def _request(self, op: Operation, step: SendRequest) -> DataResult | Failure | None:
        """The node's answer, a `Failure` when it could not be asked, None after the client's own
        timeout (the operation then failed as timed out)."""
        try:
            with trio.move_on_after(self.timeout + 1.0) as waited:  # the RPC has its own timeout
                result: Result = await self.backend.request(step.node, step.request, self.timeout)
        except ClusterFileError as exc:  # the node was retired between the pick and the send
            return Failure("unreachable", str(exc))
        if waited.cancelled_caught:
            History.fail(op, trio.current_time(), "timeout", "client_timeout")
            return None
        if not isinstance(result, GetResult | PutResult | IncrResult | Failure):
            raise AssertionError(f"{step.node} answered a data request with {type(result).__name__}")
        return result
