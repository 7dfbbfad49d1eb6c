"""The effect executor: one node's life in an environment, and the one order its effects run in.

A `NodeHost` holds what outlives a crash of its node (the name, the store, counters of earlier
lives) and, while the node is up, the core `Node` (memory state, lost by a crash). Client
requests and peer messages wait in the host's inbox; the environment calls `step(now)` whenever
`ready(now)`: the inbox holds something or the node's next deadline has passed, and runs the
syncs `begin_sync` hands out. Steps and syncs are the whole definition of how a node's effects
are executed, for the trio runtime and the simulator alike:

1. up to `BATCH` inputs go through the core in arrival order; an input whose handling raises is
   dropped and logged (and its client, if any, gets an internal error): one bad message never
   takes the node down;
   then corruption the store found (at open, or in this batch's reads) is logged with its file and
   offset and handed to the node (`storage_damaged`), which repairs it from other replicas;
2. the node's timers fire if due (`tick`);
3. the effects that need no durability go out, in order (sends, answers, notes);
4. the durable effects wait for a sync that begins after the step: after each step, and whenever
   a sync ends, the environment calls `begin_sync`, which (unless a sync is still running) takes
   the blocking half of the store's sync (`Store.begin_sync`, taken here on the owner's thread;
   the half it returns touches only file descriptors) for every batch waiting. The environment
   runs it (inline, in a worker thread, or after a simulated fsync delay) and calls `end_sync`,
   which sends those batches' durable effects, batch by batch in order. The node keeps stepping
   while a sync runs, and the batches handled meanwhile share the next sync: pipelined group
   commit. A node killed while a sync runs sends none of the effects waiting for it, so nothing
   is acknowledged that a crash could lose.

The `rid` of a client request, one rule in every environment (the simulator, the in-process
cluster, node processes, the Maelstrom node): it is its client's own number (not an increment's
`request_id`), and no host relies on it being unique, since a node process serves many clients,
each counting from 1. `submit` runs each request under a ticket of the host's, unique in this
host, as the `rid` the core sees and answers (`Respond`), and returns it: the submitter's handle
to `forget` the request. The client's own number goes no further, and results carry none: the
responder handed in with the request is how an answer finds its client.

Submit-then-wait is `Call`, once for every environment: it submits, keeps the answer, and when
its environment stopped waiting (node/runtime.py `call` on trio, `SimCluster.call` in the
simulator) forgets the request, so nothing of a request its client gave up on waits here.

Every client data request submitted here is counted in this node's metrics when its answer goes
out, whoever coordinated it and whatever answered it (the core, an overloaded inbox, a kill), and
whether or not its client still waits: by outcome, and if it succeeded, its latency from `submit`
to the answer, read from the environment's `clock`. The core's own `now` cannot measure it: a
read at ONE answered from the node's own copy is answered in the step that received it, at the
same `now`.

Anything else that raises in a step (a timer's bug, a failed sync, an input's error listed in
`fatal`, such as a disk that failed) reaches the environment, which decides what it means: the
simulator turns a simulated power cut into a machine crash; otherwise the environment calls
`crash`, which ends this node's life loudly (logged with the node's id, kept as `crash_reason`
for status, told as a note) and never touches the environment's other nodes or its caller.
"""

from __future__ import annotations

import errno
import logging
from collections import deque
from collections.abc import Callable
from random import Random
from typing import Any

from bhandar_cli.core import Node, NodeBoot
from bhandar_cli.core.membership import Ring
from bhandar_cli.core.model import OK, NodeConfig, NodeMetrics, Store, StoreJob
from bhandar_cli.core.protocol import (
    ClientRequest,
    DotLeaseSaved,
    Effect,
    Failure,
    Note,
    Respond,
    Result,
    Send,
    counted_as,
    replaced,
)

log = logging.getLogger("bhandar.node")

INBOX_SIZE = 10_000
BATCH = 256

# A disk's own failures: the machine's, not a bug of the node (said so, with what to do about it).
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
DISK_FAILED = frozenset({errno.EIO, errno.EROFS})


def disk_trouble(exc: BaseException) -> str | None:
    """What a failed store call says of its disk ("its disk is full: No space left on device"),
    or None when the failure is not the disk's (an internal error)."""
    if not isinstance(exc, OSError) or exc.errno is None:
        return None
    if exc.errno in DISK_FULL:
        return f"its disk is full: {exc.strerror}"
    if exc.errno in DISK_FAILED:
        return f"its disk failed: {exc.strerror}"
    return None


SendFn = Callable[[str, str, Any], None]  # (src, dst, message): the environment's network
NoteFn = Callable[[str, Note], None]  # (node, note): what a person watching is told
Responder = Callable[[Result], None]
Fsync = Callable[[], None]  # blocking: makes every write made before `begin_sync` durable
Clock = Callable[[], float]  # the environment's time, in seconds
Submit = Callable[[ClientRequest, Responder], int]  # hands a request in; returns its ticket
Forget = Callable[[int], None]  # the client stopped waiting for the request of this ticket


class Call:
    """One client request submitted and waited for: the submit-then-wait of every environment.

    It submits at once and keeps the answer when it comes (`answered` runs then: the environment's
    wake-up). The environment waits its own way, then takes `outcome`: the answer, or, if none came,
    a timeout, after the request was forgotten where it was submitted (its responder dropped, the
    request no longer in flight for a drain)."""

    __slots__ = ("_answered", "_forget", "_ticket", "result")

    def __init__(
        self, submit: Submit, forget: Forget, request: ClientRequest, answered: Callable[[], None]
    ) -> None:
        self.result: Result | None = None
        self._answered = answered
        self._forget = forget
        self._ticket = submit(request, self._answer)

    def _answer(self, result: Result) -> None:
        self.result = result
        self._answered()

    def outcome(self, who: str, timeout: float) -> Result:
        """The answer; or the client gives up now: the request is forgotten, the result a timeout."""
        if self.result is not None:
            return self.result
        self._forget(self._ticket)
        return Failure("timeout", f"no answer from {who} within {timeout:g} s")


class _InFlight:
    """A client request this host runs: whom to answer (None once its client stopped waiting) and,
    for a data request, what to count when its answer goes out."""

    __slots__ = ("counted", "responder", "started")

    def __init__(self, responder: Responder, counted: tuple[str, str] | None, started: float) -> None:
        self.responder: Responder | None = responder
        self.counted = counted  # (operation, level), or None: not a data request
        self.started = started


class PendingSync:
    """A sync handed to the environment: the blocking fsync to run, and the durable effects of the
    batches that go out once it has run, in order."""

    __slots__ = ("batches", "fsync")

    def __init__(self, fsync: Fsync, batches: list[list[Any]]) -> None:
        self.fsync = fsync
        self.batches = batches


class NodeHost:
    """One node's place in an environment: its store, its inbox, and (while up) its core state."""

    def __init__(
        self,
        *,
        name: str,
        zone: str,
        ring: Ring,
        store: Store,
        config: NodeConfig,
        seed: int,
        send: SendFn,
        on_note: NoteFn | None = None,
        fatal: tuple[type[BaseException], ...] = (),
        clock: Clock | None = None,
        boot: NodeBoot | None = None,
    ) -> None:
        self.name = name
        self.zone = zone
        self.ring = ring  # the cluster as known when the node boots (gossip keeps its own view)
        self.store = store
        self.config = config
        self.send = send
        self.on_note = on_note
        self.fatal = fatal
        # What each life boots with besides the store and ring (a joining node's status, its tokens,
        # seeds, address): replaced, never changed in place, by whoever knows better (a new port).
        self.boot = boot if boot is not None else NodeBoot()
        self.node: Node | None = None
        self.generation = 0  # lives started
        self.crash_reason: str | None = None  # why the last life ended on its own, if it did
        self.disk_trouble: str | None = None  # ... when that was its disk (full, failed)
        self.errors = 0  # inputs dropped because handling them raised
        self.past_metrics = NodeMetrics()  # counters of lives that ended
        self.wake: Callable[[], None] = lambda: None  # the environment's: an input is waiting
        self.seed = seed  # each life's node draws its randomness from here, in order
        self._rng = Random(seed)
        self._inbox: deque[tuple[str | None, Any]] = deque()
        self._in_flight: dict[int, _InFlight] = {}  # by ticket
        self._last_ticket = 0
        self._unsynced: list[list[Any]] = []  # durable effects of batches no sync has begun for
        self._syncing: PendingSync | None = None  # the sync running, if any
        self._now = 0.0  # the last step's time: the clock of an environment that gives none
        self.clock: Clock = clock if clock is not None else (lambda: self._now)

    # --- life --------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.node is not None

    def start(self, now: float) -> None:
        """Boot a new life of the node on the store (a restart after a kill or crash)."""
        if self.node is not None:
            raise RuntimeError(f"node {self.name} is already running")
        self.generation += 1
        self.crash_reason = None
        self._inbox.clear()
        rng = Random(self._rng.getrandbits(64))
        node = Node(self.name, self.ring, self.store, rng, now, self.config, boot=self.boot)
        self.store.sync()  # the new generation must survive the next crash
        self.node = node

    def kill(self, reason: str = "crashed") -> None:
        """End this life with no clean-up: memory state and requests in flight here are lost."""
        node, self.node = self.node, None
        if node is None:
            return
        self.past_metrics.merge(node.metrics)
        self._inbox.clear()
        self._unsynced = []  # what these wait for may be lost: they never go out
        self._syncing = None
        in_flight, self._in_flight = self._in_flight, {}
        # Not "unavailable" (which promises nothing was applied): the request may have been.
        failure = Failure(
            "timeout", f"node {self.name} {reason} before answering; the request may have taken effect"
        )
        for request in in_flight.values():
            self._settle(request, failure)

    def crash(self, exc: BaseException, what: str = "crashed") -> None:
        """End this life because of `exc`: loud (logged, noted, kept for status), never raised."""
        disk = disk_trouble(exc)
        self.crash_reason = f"{what}: {disk}" if disk else f"{what}: {type(exc).__name__}: {exc}"
        self.disk_trouble = disk
        log.error("node %s %s", self.name, self.crash_reason, exc_info=exc)
        self.kill(f"stopped ({disk})" if disk else "crashed (internal error)")
        self._note(Note(f"{self.name} {self.crash_reason}", {"node": self.name, "crashed": True}))

    def background_job(self) -> StoreJob | None:
        """The store's next due flush or compaction, for the environment to run (None: nothing)."""
        if self.node is None:
            return None
        return self.store.background_job()

    # --- inputs ------------------------------------------------------------------------------

    def deliver(self, src: str, msg: Any) -> bool:
        """A message from the network; False if the node is down or its inbox is full (dropped)."""
        if self.node is None or len(self._inbox) >= INBOX_SIZE:
            return False
        self._enqueue(src, msg)
        return True

    def submit(self, request: ClientRequest, responder: Responder) -> int:
        """A client request; `responder` is called exactly once with the result (unless `forget`).
        Returns its ticket: the `rid` it runs under here (see the module docstring). A data
        request is counted in the metrics when its answer goes out."""
        self._last_ticket += 1
        ticket = self._last_ticket
        counted = counted_as(request)
        entry = _InFlight(responder, counted, 0.0 if counted is None else self.clock())
        if self.node is None:
            self._settle(
                entry, Failure("unavailable", f"node {self.name} is down; revive it or use another node")
            )
        elif len(self._inbox) >= INBOX_SIZE:
            self._settle(entry, Failure("unavailable", f"node {self.name} is overloaded (inbox full)"))
        else:
            self._in_flight[ticket] = entry
            self._enqueue(None, replaced(request, rid=ticket))
        return ticket

    def forget(self, ticket: int) -> None:
        """The client stopped waiting for the request of `ticket`: it is never answered. (A data
        request is still counted when the node's answer goes out.)"""
        entry = self._in_flight.get(ticket)
        if entry is None:
            return
        if entry.counted is None:
            del self._in_flight[ticket]
        else:
            entry.responder = None

    @property
    def waiting(self) -> int:
        """Client requests in flight here whose client still waits for the answer."""
        return sum(1 for entry in self._in_flight.values() if entry.responder is not None)

    def _answer(self, ticket: int, result: Result) -> None:
        entry = self._in_flight.pop(ticket, None)
        if entry is not None:
            self._settle(entry, result)

    def _settle(self, entry: _InFlight, result: Result) -> None:
        """Count a data request's outcome and latency, then answer its client if it still waits."""
        if entry.counted is not None:
            op, level = entry.counted
            outcome = result.code if isinstance(result, Failure) else OK
            metrics = self.node.metrics if self.node is not None else self.past_metrics
            metrics.observe(op, level, outcome, (self.clock() - entry.started) * 1000.0)
        if entry.responder is not None:
            entry.responder(result)

    def _enqueue(self, src: str | None, msg: Any) -> None:
        self._inbox.append((src, msg))
        if len(self._inbox) == 1:  # it was empty: the environment may be waiting for input
            self.wake()

    # --- stepping ----------------------------------------------------------------------------

    def next_deadline(self) -> float:
        node = self.node
        return float("inf") if node is None else node.next_deadline()

    def ready(self, now: float) -> bool:
        node = self.node
        return node is not None and (bool(self._inbox) or now >= node.next_deadline())

    def step(self, now: float) -> None:
        """Run one batch through the node (see the module docstring): its durable effects wait for
        `begin_sync`. What raises here (other than one input's handling) is the environment's to
        turn into a crash."""
        node = self.node
        if node is None:
            return
        self._now = now
        # Damage found at open is the node's to know before it answers anything: a read of what
        # it lost must not be answered from its own copy (core/repair/unrepaired.py).
        effects = self._storage_damaged(node, now)
        effects.extend(self._handle_batch(node, now))
        effects.extend(self._storage_damaged(node, now))  # found by this batch's reads
        if now >= node.next_deadline():
            effects.extend(node.tick(now))
        durable = [e for e in effects if e.durable]
        if not durable or "ack_before_sync" in self.config.bugs:
            # (The planted bug forgets the sync: acks rest on whatever a later sync saves.)
            self._dispatch(effects)
            return
        self._dispatch([e for e in effects if not e.durable])
        self._unsynced.append(durable)

    def _storage_damaged(self, node: Node, now: float) -> list[Effect]:
        """Log the damage the store found since the last call, and hand it to the node; then make
        what the node marked unrepaired durable at once (the damage may not be found again)."""
        damage = self.store.take_damage()
        if not damage:
            return []
        for d in damage:
            log.error("node %s: storage %s", self.name, d.message)
        effects = node.storage_damaged(now, damage)
        self.store.sync()
        return effects

    @property
    def wants_sync(self) -> bool:
        """Durable effects wait for a sync, and none is running."""
        return self._syncing is None and bool(self._unsynced)

    def begin_sync(self) -> PendingSync | None:
        """The sync for every batch whose durable effects wait, for the environment to run and then
        pass to `end_sync`; None if none waits, if a sync is still running (the next one covers
        them), or if the store had nothing to wait for (their effects went out already)."""
        if not self.wants_sync:
            return None
        batches, self._unsynced = self._unsynced, []
        fsync = self.store.begin_sync()  # here, on the owner's thread
        if fsync is None:
            for batch in batches:
                self._dispatch(batch)
            return None
        self._syncing = PendingSync(fsync, batches)
        return self._syncing

    def end_sync(self, sync: PendingSync) -> None:
        """`sync.fsync` returned: its batches' durable effects go out, in order (unless the node
        was killed meanwhile: then they never do)."""
        if sync is not self._syncing:
            return
        self._syncing = None
        for batch in sync.batches:
            self._dispatch(batch)

    def _handle_batch(self, node: Node, now: float) -> list[Any]:
        effects: list[Any] = []
        inbox = self._inbox
        for _ in range(min(len(inbox), BATCH)):
            src, msg = inbox.popleft()
            try:
                effects.extend(node.request(now, msg) if src is None else node.handle(now, src, msg))
            except self.fatal:
                raise
            except Exception as exc:  # a malformed message, or our bug: never let it kill the node
                self._dropped(src, msg, exc)
        return effects

    def _dispatch(self, effects: list[Any]) -> None:
        for effect in effects:
            cls = effect.__class__
            if cls is Send:
                if effect.dst == self.name:  # to itself (a coordinator's ack of its own synced copy)
                    self._enqueue(self.name, effect.msg)
                else:
                    self.send(self.name, effect.dst, effect.msg)
            elif cls is Respond:
                self._answer(effect.rid, effect.result)
            elif cls is Note:
                self._note(effect)
            elif cls is DotLeaseSaved and self.node is not None:
                self.node.dot_lease_saved(effect)

    def _note(self, note: Note) -> None:
        if self.on_note is not None:
            self.on_note(self.name, note)

    def _dropped(self, src: str | None, msg: Any, exc: Exception) -> None:
        self.errors += 1
        what = f"{type(msg).__name__} from {src or 'a client'}"
        log.error("%s dropped %s: %s: %s", self.name, what, type(exc).__name__, exc, exc_info=exc)
        self._note(Note(f"{self.name} dropped {what} it could not handle ({type(exc).__name__})"))
        if src is None:  # a client request, under its ticket
            self._answer(
                msg.rid, Failure("internal", f"node {self.name} could not handle the request: {exc}")
            )

    # --- views -------------------------------------------------------------------------------

    def address_of(self, peer: str) -> str:
        """Where `peer` listens, as this node's membership knows ("" if unknown or down)."""
        node = self.node
        return "" if node is None else node.address_of(peer)

    def metrics(self) -> NodeMetrics:
        """Counters of every life of this node, the current one included."""
        total = NodeMetrics()
        total.merge(self.past_metrics)
        if self.node is not None:
            total.merge(self.node.metrics)
        return total
