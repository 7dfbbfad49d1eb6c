"""An in-process cluster: N nodes on one trio loop, over the one network model.

Nodes are A, B, C, ... in zones z1, z2, z3, ... round-robin. Each node is a `NodeHost` (the effect
executor, shared with the simulator) run by a `NodeRunner` (its lives on trio); messages travel
through `host.network.Network` on trio's clock. The cluster owns the faults a person can inject
(partition, heal, kill, revive, delay) and the stores, which outlive a killed node.

Structured concurrency: `run` holds the cluster's nursery; every life of every node is a task in
it with a cancel scope of its own, so `kill` ends one node and nothing else, and nothing a node
does can raise into the nursery (the runner turns it into a crash of that node).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from random import Random

import trio

from bhandar_cli.core import NodeBoot
from bhandar_cli.core.membership import Ring, node_tokens
from bhandar_cli.core.model import BadInput, MemoryStore, NodeConfig, Store, Unavailable
from bhandar_cli.core.protocol import ClientRequest, Note, Result
from bhandar_cli.host import LatencyModel, Network, NetworkModel, NodeHost, node_names, zone_map
from bhandar_cli.node import FATAL, NodeRunner, TrioTimers, call

MAX_NODES = 240  # in-process nodes (names A..Z, AA, AB, ...): a few MB each


class InProcessCluster:
    def __init__(
        self,
        nodes: int = 5,
        zones: int = 3,
        vnodes: int = 8,
        seed: int = 0,
        config: NodeConfig | None = None,
        latency: LatencyModel | None = None,
        store_factory: Callable[[str], Store] | None = None,
    ) -> None:
        if not 1 <= nodes <= MAX_NODES:
            raise ValueError(f"--nodes must be between 1 and {MAX_NODES} (got {nodes})")
        self.names = node_names(nodes)
        self.zones = zone_map(self.names, zones)
        self.vnodes = vnodes
        self.ring = Ring.build(self.names, vnodes, self.zones)
        self.config = config or NodeConfig()
        rng = Random(seed)
        # A stream per sender: trio runs the nodes' tasks in an order it shuffles (network.py).
        self.model = NetworkModel(Random(rng.getrandbits(64)), latency or LatencyModel(), per_sender=True)
        self.timers = TrioTimers()
        self.network = Network(self.model, self.timers.schedule, self._deliver)
        self._make_store = store_factory or (lambda _name: MemoryStore())
        self.memory_only = store_factory is None  # no storage engine: nothing to flush or snapshot
        self._rng = rng
        # What nodes noticed (peers down or up, joins, crashes); bounded, the REPL drains it.
        self.notes: deque[tuple[float, str, Note]] = deque(maxlen=1000)
        self.hosts: dict[str, NodeHost] = {}
        self.runners: dict[str, NodeRunner] = {}
        for name in self.names:
            self._new_host(name, self.zones[name], self._make_store(name))
        self._nursery: trio.Nursery | None = None
        self._next_rid = 1

    def _new_host(self, name: str, zone: str, store: Store) -> NodeHost:
        host = NodeHost(
            name=name,
            zone=zone,
            ring=self.ring,
            store=store,
            config=self.config,
            seed=self._rng.getrandbits(64),
            send=self.network.send,
            on_note=self._note,
            fatal=FATAL,
            clock=trio.current_time,
        )
        self.hosts[name] = host
        self.runners[name] = NodeRunner(host)
        return host

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start every node, report ready, then run until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.timers.run)
            for runner in self.runners.values():
                await nursery.start(runner.run)
            task_status.started()

    def _deliver(self, dst: str, src: str, msg: object) -> bool:
        host = self.hosts.get(dst)
        return host is not None and host.deliver(src, msg)

    def _note(self, name: str, note: Note) -> None:
        self.notes.append((trio.current_time(), name, note))

    def host(self, name: str) -> NodeHost:
        try:
            return self.hosts[name]
        except KeyError:
            raise BadInput(f"unknown node {name!r} (nodes are {', '.join(self.names)})") from None

    # --- requests ------------------------------------------------------------------------------

    def new_rid(self) -> int:
        rid = self._next_rid
        self._next_rid += 1
        return rid

    async def request(self, via: str, request: ClientRequest, timeout: float) -> Result:
        """Node `via`'s result for `request`, or a timeout (the request forgotten there)."""
        host = self.host(via)
        return await call(host.submit, host.forget, request, timeout, via)

    # --- lifecycle -----------------------------------------------------------------------------

    def kill(self, name: str) -> bool:
        """Crash a node: its memory state is lost, its store stays. False if it was down."""
        self.host(name)
        return self.runners[name].kill()

    async def revive(self, name: str, reopen: bool = True) -> bool:
        """Start a new life of a node that is down. False if it was up."""
        host, runner = self.host(name), self.runners[name]
        if host.alive:
            return False
        await runner.stopped()  # the last life's tasks (a sync in a thread) are gone
        if reopen:
            host.store.reopen()  # a restarted node reads its data back from disk (WAL replay)
        await self._start(runner)
        return True

    async def _start(self, runner: NodeRunner) -> None:
        assert self._nursery is not None, "the cluster is not running"
        await self._nursery.start(runner.run)
        host = runner.host
        if not host.alive:
            raise Unavailable(f"node {host.name} {host.crash_reason or 'did not start'}")

    async def add_node(self, name: str, zone: str | None = None, store: Store | None = None) -> NodeHost:
        """Start a new node that bootstraps into the ring (status joining, then normal)."""
        if name in self.hosts:
            raise BadInput(f"node {name} already exists")
        zones = sorted(set(self.zones.values()))
        chosen = zone or zones[len(self.names) % len(zones)]
        # The cluster configuration its peers run (node/reconfigure.py keeps it in their boot).
        config = [h.boot.live for h in self.hosts.values() if h.boot.live is not None]
        host = self._new_host(name, chosen, store if store is not None else self._make_store(name))
        live = [n for n, h in self.hosts.items() if h.alive]
        host.boot = NodeBoot(
            status="joining",
            seeds=tuple(live),
            zone=chosen,
            tokens=tuple(node_tokens(name, self.vnodes)),
            live=max(config, key=lambda c: c.version) if config else None,
        )
        self.names.append(name)
        self.zones[name] = chosen
        await self._start(self.runners[name])
        return host

    async def retire(self, name: str) -> None:
        """Stop a node that left the ring for good and forget it (its store is kept)."""
        self.host(name)
        runner = self.runners.pop(name)
        runner.kill("was shut down")
        await runner.stopped()
        del self.hosts[name]
        self.names.remove(name)
        self.zones.pop(name, None)

    # --- the network -----------------------------------------------------------------------------

    def partition(self, groups: list[list[str]]) -> list[list[str]]:
        for group in groups:
            for name in group:
                self.host(name)
        return self.model.partition(groups, self.names)

    def heal(self) -> None:
        self.network.heal()

    def delay(self, name: str, ms: float) -> None:
        self.host(name)
        self.model.set_delay(name, ms / 1000.0)
