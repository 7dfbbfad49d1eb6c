"""A simulated cluster: core nodes driven by the event loop over the simulated network.

This is the deterministic driver: the same `Node` state machines as the trio runtime, but every
delivery, timer and fault is an event on one heap, and all randomness descends from one seed.

Storage: each host's store comes from `store_factory` (in-memory by default: it survives a crash
whole). A store on a simulated disk is crashed with the machine: `crash_store` runs at `kill` (the
power loss: unsynced writes are lost) and `reopen_store` at `revive` (recovery from what the disk
kept). The driver syncs the store before it carries out the first durable effect of an event, so
a crash between a write and its sync loses only what nobody was told about. `crash_during_io`
makes a host die in the middle of a step (inside a WAL append, an fsync, a flush or a compaction):
the store raises, the step's effects are dropped, and the driver kills the host.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random
from typing import Any

from bhandar_cli.core.config import NodeConfig
from bhandar_cli.core.messages import ClientRequest, Failure, Note, Respond, Result, Send
from bhandar_cli.core.metrics import NodeMetrics
from bhandar_cli.core.node import Node
from bhandar_cli.core.ring import Ring, node_tokens
from bhandar_cli.core.store import MemoryStore, Store
from bhandar_cli.sim.loop import EventLoop
from bhandar_cli.sim.network import LatencyModel, SimNetwork


def node_names(count: int) -> list[str]:
    """A, B, ..., Z, then N26, N27, ..."""
    return [chr(ord("A") + i) if i < 26 else f"N{i}" for i in range(count)]


def zone_map(names: list[str], zones: int) -> dict[str, str]:
    """Zones z1, z2, ... assigned round-robin."""
    return {name: f"z{i % max(zones, 1) + 1}" for i, name in enumerate(names)}


@dataclass
class SimHost:
    """One machine: its durable store survives; its `node` (memory state) dies with a crash."""

    id: str
    store: Store
    node: Node | None = None
    tick_token: int = 0
    tick_at: float = math.inf
    restarts: int = 0
    joining: bool = False  # added by `add_node`: boots as a joining member with its own tokens
    zone: str | None = None
    # Counters of the node's earlier lives: a crash loses the node's memory, but a person watching
    # (and the chaos summary) still wants to know how many hints it stored before it died.
    past_metrics: NodeMetrics = field(default_factory=NodeMetrics)


@dataclass
class SimCluster:
    seed: int
    nodes: int = 5
    zones: int = 3
    vnodes: int = 8
    config: NodeConfig = field(default_factory=NodeConfig)
    latency: LatencyModel = field(default_factory=LatencyModel)
    loss: float = 0.0
    duplicate: float = 0.0
    store_factory: Callable[[str], Store] = lambda _name: MemoryStore()
    # Called with (host name, its store) when the host crashes, and when it restarts; the second
    # returns the store the new life runs on. None: the store object survives as it is.
    crash_store: Callable[[str, Store], None] | None = None
    reopen_store: Callable[[str, Store], Store] | None = None
    # Crashes in the middle of a disk operation: `arm_crash` makes the host's store fail within its
    # next few writes by raising one of `crash_errors`, which the driver turns into a `kill`.
    arm_crash: Callable[[str, Store], None] | None = None
    crash_errors: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        self.rng = Random(self.seed)
        self.loop = EventLoop()
        names = node_names(self.nodes)
        self.ring = Ring.build(names, self.vnodes, zone_map(names, self.zones))
        self.net = SimNetwork(
            self.loop,
            Random(self.rng.getrandbits(64)),
            self._deliver,
            self.latency,
            self.loss,
            self.duplicate,
        )
        self._client_rng = Random(self.rng.getrandbits(64))
        self.hosts: dict[str, SimHost] = {n: SimHost(n, self.store_factory(n)) for n in names}
        # Hosts in service, in the order they were added: a retired host (decommissioned and shut
        # down) is left out and never revived. Replaced, never mutated, so holders see a snapshot.
        self.members: list[str] = list(names)
        self.retired: set[str] = set()
        # Test-only planted bug: acknowledge before the store is synced (the chaos checker must
        # notice once crashes lose unsynced writes).
        self._sync_durable = "ack_before_sync" not in self.config.bugs
        self.notes: list[tuple[float, str, Note]] = []
        self._waiters: dict[int, Callable[[Result], None]] = {}
        self._next_rid = 1
        for name in names:
            self._boot(self.hosts[name])

    # --- driving nodes -----------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self.loop.now

    def _boot(self, host: SimHost) -> None:
        rng = Random(self.rng.getrandbits(64))
        extra: dict[str, Any] = {}
        if host.joining:
            live = [n for n, h in self.hosts.items() if h.node is not None and n != host.id]
            tokens = tuple(node_tokens(host.id, self.vnodes))
            extra = {"status": "joining", "seeds": live, "zone": host.zone, "tokens": tokens}
        host.node = Node(host.id, self.ring, host.store, rng, self.loop.now, self.config, **extra)
        host.store.sync()  # the node's new generation must survive its next crash
        host.tick_at = math.inf
        self._schedule_tick(host)

    def _run(self, host: SimHost, effects: list[Any]) -> None:
        # One sync before the first durable effect covers every write the event made: they all
        # happened inside the node's handler, before it returned its effects.
        synced = not self._sync_durable
        send = self.net.send
        for effect in effects:
            cls = effect.__class__
            if cls is Send:
                if effect.durable and not synced:
                    host.store.sync()
                    synced = True
                send(host.id, effect.dst, effect.msg)
            elif cls is Respond:
                if effect.durable and not synced:
                    host.store.sync()
                    synced = True
                waiter = self._waiters.pop(effect.rid, None)
                if waiter is not None:
                    self.loop.call_later(self.latency.sample(self._client_rng), waiter, effect.result)
            elif isinstance(effect, Note):
                self.notes.append((self.loop.now, host.id, effect))
        # _schedule_tick, inlined (it runs after every event a node handles).
        node = host.node
        if node is not None:
            deadline = node.next_deadline()
            if deadline < host.tick_at:
                host.tick_at = deadline
                host.tick_token += 1
                self.loop.push(deadline, self._tick, (host, host.tick_token))

    def _schedule_tick(self, host: SimHost) -> None:
        node = host.node
        if node is None:
            return
        deadline = node.next_deadline()
        if deadline < host.tick_at:
            host.tick_at = deadline
            host.tick_token += 1
            self.loop.call_at(deadline, self._tick, host, host.tick_token)

    def _tick(self, host: SimHost, token: int) -> None:
        if token != host.tick_token or host.node is None:
            return
        host.tick_at = math.inf
        try:
            self._run(host, host.node.tick(self.loop.now))
        except self.crash_errors:
            self.kill(host.id)  # the machine died inside this step; nothing it meant to send left

    def _deliver(self, dst: str, src: str, msg: Any) -> None:
        host = self.hosts.get(dst)
        if host is None or host.node is None:
            return
        try:
            self._run(host, host.node.handle(self.loop.now, src, msg))
        except self.crash_errors:
            self.kill(host.id)

    # --- clients -----------------------------------------------------------------------------

    def new_rid(self) -> int:
        rid = self._next_rid
        self._next_rid += 1
        return rid

    def submit(
        self, via: str, request: ClientRequest, on_result: Callable[[Result], None], delay: float = 0.0
    ) -> None:
        """Send a client request to node `via` after `delay` seconds; `on_result` runs when (if) the
        answer arrives."""
        self._waiters[request.rid] = on_result
        self.loop.call_later(
            delay + self.latency.sample(self._client_rng), self._client_arrives, via, request
        )

    def _client_arrives(self, via: str, request: ClientRequest) -> None:
        host = self.hosts[via]
        if host.node is None:
            return  # a dead node never answers; the client times out
        try:
            self._run(host, host.node.request(self.loop.now, request))
        except self.crash_errors:
            self.kill(host.id)

    def call(self, via: str, request: ClientRequest, timeout: float = 5.0) -> Result:
        """Submit and run the simulation until the answer arrives or the client gives up."""
        box: list[Result] = []
        self.submit(via, request, box.append)
        if not self.loop.run_until_true(lambda: bool(box), self.loop.now + timeout):
            self._waiters.pop(request.rid, None)
            return Failure("timeout", f"no answer from {via} within {timeout:g} s (client timeout)")
        return box[0]

    def forget(self, rid: int) -> None:
        """Stop waiting for a request (the client gave up on it)."""
        self._waiters.pop(rid, None)

    # --- faults ------------------------------------------------------------------------------

    def kill(self, name: str) -> None:
        """Crash the host: the node's memory is lost, and so is its store's unsynced state."""
        host = self.hosts[name]
        if host.node is None:
            return
        host.past_metrics.merge(host.node.metrics)
        host.node = None
        host.tick_token += 1
        host.tick_at = math.inf
        if self.crash_store is not None:
            self.crash_store(name, host.store)

    def crash_during_io(self, name: str) -> bool:
        """Make the host crash inside one of its next disk writes (False: its store cannot)."""
        host = self.hosts[name]
        if self.arm_crash is None or host.node is None:
            return False
        self.arm_crash(name, host.store)
        return True

    def revive(self, name: str) -> None:
        host = self.hosts[name]
        if host.node is None and name not in self.retired:
            host.restarts += 1
            if self.reopen_store is not None:
                host.store = self.reopen_store(name, host.store)
            self._boot(host)

    def retire(self, name: str) -> None:
        """Shut a host down for good (after it left the ring): a clean stop, its store synced."""
        host = self.hosts[name]
        if host.node is not None:
            host.past_metrics.merge(host.node.metrics)
            host.store.sync()
        host.node = None
        host.tick_token += 1
        host.tick_at = math.inf
        self.retired.add(name)
        self.members = [n for n in self.members if n != name]

    def add_node(self, name: str, zone: str | None = None) -> None:
        """Start a new node that bootstraps into the ring (it announces itself joining)."""
        if name in self.hosts:
            raise ValueError(f"node {name} already exists")
        zones = sorted(set(self.ring.zones.values()))
        chosen = zone or zones[len(self.hosts) % len(zones)]
        host = SimHost(name, self.store_factory(name), joining=True, zone=chosen)
        self.hosts[name] = host
        self.members = [*self.members, name]
        self._boot(host)

    def status_of(self, name: str, seen_by: str | None = None) -> str:
        """A member's status as `seen_by` (default: the member itself) knows it."""
        host = self.hosts[seen_by or name]
        return "unknown" if host.node is None else host.node.status_of(name)

    def is_alive(self, name: str) -> bool:
        return self.hosts[name].node is not None

    def run_for(self, seconds: float) -> None:
        self.loop.run_until(self.loop.now + seconds)

    # --- views for tools and checkers ----------------------------------------------------------

    def metrics(self) -> NodeMetrics:
        """Every node's counters merged, including those of lives that ended in a crash."""
        total = NodeMetrics()
        for host in self.hosts.values():
            total.merge(host.past_metrics)
            if host.node is not None:
                total.merge(host.node.metrics)
        return total

    def hints_pending(self) -> int:
        """Hints held anywhere (read from the durable stores, so dead and retired holders count too,
        except a crashed simulated disk: it is readable again once its host restarts)."""
        crashed = self.crash_store is not None
        return sum(
            1
            for name, host in self.hosts.items()
            if not (crashed and host.node is None and name not in self.retired)
            for _ in host.store.hints()
        )

    def ring_view(self) -> Ring:
        """The ring as the first live member sees it (gossip's view), else the initial one."""
        for name in self.members:
            node = self.hosts[name].node
            if node is not None:
                return node.ring
        return self.ring
