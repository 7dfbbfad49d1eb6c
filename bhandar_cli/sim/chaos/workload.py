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

Each client drives a client session (core/session/client_session.py), the code every user's
client runs: it remembers contexts per key, chooses the node (the first live replica of the key by
the ring gossip gave, going around one that failed a request when that is safe) and reads before a
delete that has no context. What the workload still chooses itself is handed to the session: the
key, the level, a blind put (context none), an increment's request id (a retry keeps it), and half
the time a node picked at random among those in service (`SimCluster.members`), so that writes
coordinated by forwarding non-replicas are exercised too. A client that picks a dead node is refused
at once (a connection refused) and picks a live node; it cannot tell a partitioned or slow node
from a healthy one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from random import Random

from bhandar_cli.core.membership import Ring
from bhandar_cli.core.model import JSON, KeyspaceDef
from bhandar_cli.core.protocol import Failure, GetResult, IncrResult, PutRequest, PutResult, Result
from bhandar_cli.core.session import ClientSession, Done, Exchange, SendRequest
from bhandar_cli.sim import History, Operation, SimCluster

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
    """One client: its session (contexts of its last reads), and an increment it is retrying."""

    id: int
    session: ClientSession
    retry: tuple[str, str, int, int] | None = None  # (key, request id, delta, attempt)
    resend: tuple[str, str, int] | None = None  # (key, request id, delta)
    busy: Operation | None = None
    exchange: Exchange | None = None  # the session's operation in flight
    rid: int = 0  # the id of the request in flight


class _ClusterView:
    """The cluster as a client sees it (the session's `ClusterView`): the ring gossip gave, and
    which nodes refuse a connection."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster

    @property
    def ring(self) -> Ring:
        return self.cluster.ring_view()

    def is_alive(self, name: str) -> bool:
        return self.cluster.is_alive(name)


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
        self.clients = [_Client(i, ClientSession(cluster.new_rid)) for i in range(params.clients)]
        self.view = _ClusterView(cluster)
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
        session = client.session
        via = self._via()
        if kind < 0.4:
            op = self.history.invoke(at, client.id, "get", ks, key, level)
            self._send(client, op, session.get(ks, key, level=level, via=via))
        elif kind < 0.9:
            blind = kind >= 0.8  # a blind put; else read, modify, write with the last read's context
            self._next_value += 1
            value = f'"c{client.id}-{self._next_value}"'.encode()
            exchange = session.put(
                ks, key, value, JSON, context="none" if blind else "auto", level=level, via=via
            )
            op = self.history.invoke(at, client.id, "put", ks, key, level, value, None)
            self._send(client, op, exchange)
        else:
            # The session's delete: with the context of the last read, else it reads first; that
            # read is a get of the history (the checker learns the dots it saw), then the delete.
            exchange = session.delete(ks, key, level=level, via=via)
            op = self.history.invoke(
                at, client.id, "get" if exchange.then_delete else "delete", ks, key, level
            )
            self._send(client, op, exchange)

    def _key(self) -> str:
        # Squaring a uniform number skews the choice towards low indices: a few hot keys.
        return f"k{int(self.params.keys * self.rng.random() ** 2)}"

    def _via(self) -> str | None:
        """Half the time a node in service picked at random (a live one if it is dead), to
        exercise coordination by a node that forwards; else the session chooses (None)."""
        if self.rng.random() < 0.5:
            return None
        cluster = self.cluster
        names = cluster.members
        via = names[int(self.rng.random() * len(names))]
        if not cluster.is_alive(via):
            alive = [name for name in names if cluster.is_alive(name)]
            return self.rng.choice(alive) if alive else None  # none: the session says so
        return via

    def _incr(
        self, client: _Client, at: float, key: str, request_id: str, delta: int, attempt: int, level: str
    ) -> None:
        op = self.history.invoke(
            at, client.id, "incr", TALLY, key, level, request_id=request_id, delta=delta, attempt=attempt
        )
        exchange = client.session.incr(TALLY, key, delta, request_id, level=level, via=self._via())
        self._send(client, op, exchange)

    def _send(self, client: _Client, op: Operation, exchange: Exchange) -> None:
        """Start the session's operation; its first request leaves at `op.invoked`."""
        step = exchange.start(self.view)
        if not isinstance(step, SendRequest):  # every node is down: refused at once
            History.complete(op, op.invoked, step.failure)
            self.cluster.loop.call_at(op.invoked, self._done, client, op)
            return
        client.busy, client.exchange = op, exchange
        self._submit(client, op, step, op.invoked - self.cluster.now)

    def _submit(self, client: _Client, op: Operation, step: SendRequest, delay: float) -> None:
        if op.kind in ("put", "delete") and isinstance(step.request, PutRequest):
            op.context = step.request.context  # a delete that read first knows it only now
        self.cluster.submit(step.node, step.request, lambda result: self._answered(client, op, result), delay)
        client.rid = step.request.rid

    # --- outcomes ----------------------------------------------------------------------------

    def _answered(self, client: _Client, op: Operation, result: Result) -> None:
        if client.busy is not op or client.exchange is None:
            return
        if not isinstance(result, GetResult | PutResult | IncrResult | Failure):
            raise AssertionError(f"a data request answered with {type(result).__name__}")  # a bug
        step = client.exchange.receive(result, self.view)
        if isinstance(step, SendRequest) and op.kind == "get" and isinstance(step.request, PutRequest):
            # A delete's read came back: it ends as a get, and the delete begins, one more
            # operation of the run's budget (`ops`), unless the budget is spent.
            History.complete(op, self.cluster.now, result)
            if self.issued >= self.params.ops:
                self._done(client, op)
                return
            self.issued += 1
            self._count_completed()  # never the last: the delete is still to complete
            op = self.history.invoke(self.cluster.now, client.id, "delete", op.keyspace, op.key, op.level)
            client.busy = op
        if isinstance(step, SendRequest):  # around a node that failed it, or a delete's write after its read
            self._submit(client, op, step, 0.0)
            return
        History.complete(op, self.cluster.now, step.result if isinstance(step, Done) else step.failure)
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
        client.busy, client.exchange = None, None
        if op.kind == "incr":
            if op.ok:
                client.retry = None
                if self.rng.random() < self.params.resend_rate:
                    client.resend = (op.key, op.request_id, op.delta)
            elif op.attempt < self.params.max_attempts and self.rng.random() < self.params.retry_rate:
                client.retry = (op.key, op.request_id, op.delta, op.attempt + 1)
            else:
                client.retry = None
        if not self._count_completed():
            self._act(client, -self.params.think * math.log(1.0 - self.rng.random()))

    def _count_completed(self) -> bool:
        """Count one completed operation; whether it was the last (the run stops)."""
        self.completed += 1
        if self.on_progress is not None and self.completed % self._progress_step == 0:
            self.on_progress(self.completed)
        if self.completed >= self.params.ops:
            self.done = True
            self.cluster.loop.stop()
            return True
        return False
