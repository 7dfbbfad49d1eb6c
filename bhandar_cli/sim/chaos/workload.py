"""The chaos workload: concurrent simulated clients issuing gets, puts, deletes and increments.

This module owns what clients do and records it in the checker's `History`. Each client is a
sequential process (one request at a time, as a person at a REPL or one thread of an application):
it picks a keyspace, a key (skewed, so some keys are hot and conflict) and an operation, sends it to
a node and waits for the answer or its own timeout, then thinks for a moment and goes on.

- `sibs` (sloppy quorum) and `strict` (strict quorum) are `siblings` keyspaces: reads remember the
  context they got, puts either carry the context of the client's last read of the key (read,
  modify, write) or are blind, deletes carry a context. Every put writes a value never written
  before, so the checker can follow each write.
- `tally` is a counter keyspace: increments with fresh request ids; a failed increment is retried
  with the same request id, and now and then a client re-sends an acknowledged one (as a client
  that lost the answer would), which the store must count once.

A client that picks a dead node is refused at once (a connection refused) and picks a live node;
it cannot tell a partitioned or slow node from a healthy one. Clients use the nodes in service at
the time (`SimCluster.members`): a node that joined is used as soon as it starts, a decommissioned
one no longer once it is shut down.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from random import Random

from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import JSON, context_of
from bhandar_cli.core.protocol.messages import GetRequest, IncrRequest, PutRequest, Result
from bhandar_cli.sim.history import History, Operation
from bhandar_cli.sim.sim_cluster import SimCluster

SIBS = "sibs"
STRICT = "strict"
TALLY = "tally"


HOT_KEY = "hot"


def workload_keyspaces(n: int) -> tuple[KeyspaceDef, ...]:
    return (
        KeyspaceDef(SIBS, "siblings", n, "sloppy"),
        KeyspaceDef(STRICT, "siblings", n, "strict"),
        KeyspaceDef(TALLY, "counter", n, "sloppy"),
    )


@dataclass(frozen=True, slots=True)
class WorkloadParams:
    ops: int  # client operations in all (retries included)
    clients: int
    keys: int  # per keyspace
    levels: tuple[str, ...]  # consistency levels clients pick from
    client_timeout: float  # seconds a client waits for an answer
    think: float  # mean seconds between a client's operations
    retry_rate: float = 0.8  # chance a failed increment is retried with the same request id
    resend_rate: float = 0.03  # chance an acknowledged increment is sent again
    max_attempts: int = 4
    hot: float = 0.0  # skew: this fraction of operations go to HOT_KEY of `sibs`


@dataclass(slots=True)
class _Client:
    """One client's memory: contexts of its last reads, and an increment it is retrying."""

    id: int
    contexts: dict[tuple[str, str], dict[str, int]]
    retry: tuple[str, str, int, int] | None = None  # (key, request id, delta, attempt)
    resend: tuple[str, str, int] | None = None  # (key, request id, delta)
    busy: Operation | None = None
    rid: int = 0  # the request id of the operation in flight


class Workload:
    """Drives `params.ops` operations through `cluster`, recording them in `history`."""

    def __init__(
        self,
        cluster: SimCluster,
        params: WorkloadParams,
        rng: Random,
        history: History,
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.params = params
        self.rng = rng
        self.history = history
        self.on_progress = on_progress
        self.issued = 0
        self.completed = 0
        self.clients = [_Client(i, {}) for i in range(params.clients)]
        self._next_value = 0
        self._next_request = 0
        self.done = params.ops == 0
        self._progress_step = max(1, params.ops // 200)

    def start(self) -> None:
        for client in self.clients:
            self._act(client, self.rng.random() * self.params.think)
        self.cluster.loop.call_later(self._sweep_every, self._sweep)

    @property
    def _sweep_every(self) -> float:
        return self.params.client_timeout / 4

    # --- one client step ---------------------------------------------------------------------

    def _act(self, client: _Client, delay: float) -> None:
        """Choose the client's next operation and send it `delay` seconds from now (think time).

        Thinking is folded into the request's send delay rather than being an event of its own:
        the simulation is event-bound, and this halves a client's events per operation.
        """
        if self.issued >= self.params.ops:
            return
        self.issued += 1
        rng = self.rng
        at = self.cluster.now + delay
        levels = self.params.levels
        level = levels[int(rng.random() * len(levels))]
        if client.retry is not None:
            key, request_id, delta, attempt = client.retry
            self._incr(client, at, key, request_id, delta, attempt, level)
            return
        if client.resend is not None:
            key, request_id, delta = client.resend
            client.resend = None
            self._incr(client, at, key, request_id, delta, 2, level)
            return
        if self.params.hot and rng.random() < self.params.hot:
            # The skew (--hot): a get, put or delete of one key of `sibs`. Drawn only with --hot,
            # so the seeds of runs without it replay as before.
            roll, key = 0.5, HOT_KEY
        else:
            roll = rng.random()
            key = self._key()
        if roll < 0.3:
            self._next_request += 1
            delta = rng.choice((1, 1, 1, 2, 5, -1, -3))
            self._incr(client, at, key, f"r{self._next_request}", delta, 1, level)
            return
        ks = SIBS if roll < 0.65 else STRICT
        kind = rng.random()
        context = client.contexts.get((ks, key))
        if kind < 0.4 or (kind >= 0.9 and context is None):
            op = self.history.invoke(at, client.id, "get", ks, key, level)
            self._send(client, op, GetRequest(self.cluster.new_rid(), ks, key, level))
        elif kind < 0.9:
            if kind >= 0.8:
                context = None  # a blind put
            self._next_value += 1
            value = f'"c{client.id}-{self._next_value}"'.encode()
            op = self.history.invoke(at, client.id, "put", ks, key, level, value, context)
            self._send(client, op, PutRequest(self.cluster.new_rid(), ks, key, value, JSON, context, level))
        else:
            op = self.history.invoke(at, client.id, "delete", ks, key, level, None, context)
            self._send(client, op, PutRequest(self.cluster.new_rid(), ks, key, None, JSON, context, level))

    def _key(self) -> str:
        # Squaring a uniform number skews the choice towards low indices: a few hot keys.
        return f"k{int(self.params.keys * self.rng.random() ** 2)}"

    def _incr(
        self, client: _Client, at: float, key: str, request_id: str, delta: int, attempt: int, level: str
    ) -> None:
        op = self.history.invoke(
            at, client.id, "incr", TALLY, key, level, request_id=request_id, delta=delta, attempt=attempt
        )
        self._send(client, op, IncrRequest(self.cluster.new_rid(), TALLY, key, delta, request_id, level))

    def _send(self, client: _Client, op: Operation, request: GetRequest | PutRequest | IncrRequest) -> None:
        cluster = self.cluster
        names = cluster.members
        via = names[int(self.rng.random() * len(names))]
        if not cluster.is_alive(via):
            alive = [name for name in names if cluster.is_alive(name)]
            if not alive:
                History.fail(op, op.invoked, "fail", "unreachable")
                cluster.loop.call_at(op.invoked, self._done, client, op)
                return
            via = self.rng.choice(alive)
        client.busy = op
        cluster.submit(
            via, request, lambda result: self._answered(client, op, result), op.invoked - cluster.now
        )
        client.rid = request.rid

    # --- outcomes ----------------------------------------------------------------------------

    def _answered(self, client: _Client, op: Operation, result: Result) -> None:
        if client.busy is not op:
            return
        History.complete(op, self.cluster.now, result)
        if op.ok and op.kind == "get" and isinstance(op.record, Versioned):
            client.contexts[(op.keyspace, op.key)] = context_of(op.record.siblings)
        self._done(client, op)

    def _sweep(self) -> None:
        """Time out operations that have waited `client_timeout`; one event for all clients, since
        an event per operation to cancel later would cost as much as the operation itself."""
        if self.done:
            return
        now = self.cluster.now
        limit = self.params.client_timeout
        for client in self.clients:
            op = client.busy
            if op is not None and now - op.invoked >= limit:
                self.cluster.forget(client.rid)
                History.fail(op, now, "timeout", "client_timeout")
                self._done(client, op)
        self.cluster.loop.call_later(self._sweep_every, self._sweep)

    def _done(self, client: _Client, op: Operation) -> None:
        client.busy = None
        if op.kind == "incr":
            if op.ok:
                client.retry = None
                if self.rng.random() < self.params.resend_rate:
                    client.resend = (op.key, op.request_id, op.delta)
            elif op.attempt < self.params.max_attempts and self.rng.random() < self.params.retry_rate:
                client.retry = (op.key, op.request_id, op.delta, op.attempt + 1)
            else:
                client.retry = None
        self.completed += 1
        if self.on_progress is not None and self.completed % self._progress_step == 0:
            self.on_progress(self.completed)
        if self.completed >= self.params.ops:
            self.done = True
            self.cluster.loop.stop()
            return
        self._act(client, -self.params.think * math.log(1.0 - self.rng.random()))
