"""A simulated cluster: the simulator's environment for the effect executor.

The deterministic driver: the same `NodeHost` (host/executor.py) as the trio runtime, executing
the same core nodes' effects in the same order, over the same network model (host/network.py);
only the environment differs. Every delivery, step, timer, fsync and fault is an event on one
heap, and all randomness descends from one seed.

How a host is stepped, and how long its fsyncs take, is sim/stepper.py.

Membership: by default every node boots knowing the whole initial ring (as the in-process
cluster of the REPL does). With `addressing` the nodes boot as node processes do: each knows
only itself and two seeds' addresses, finds the cluster through gossip, and reaches a peer at the
address its own membership table gives (a stale one reaches nobody). A node revived may come back
at a new address (`moves`: the chance), which its peers must learn from gossip.

Storage: each host's store comes from `store_factory` (in-memory by default: it survives a crash
whole). A store on a simulated disk is crashed with the machine: `crash_store` runs at `kill` (the
power loss: unsynced writes are lost) and `reopen_store` at `revive` (recovery from what the disk
kept). `crash_during_io` makes a host die in the middle of a step (inside a WAL append, an fsync,
a flush or a compaction): the store raises one of `crash_errors`, the step's effects are dropped,
and the driver kills the host. Any other exception inside a node is a bug: the node crashes (as
in production) and the error is kept in `internal_errors` for the checker to report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from random import Random
from typing import Any

from bhandar_cli.core import NodeBoot
from bhandar_cli.core.membership import Ring, node_tokens
from bhandar_cli.core.model import MemoryStore, NodeConfig, NodeMetrics, Store
from bhandar_cli.core.protocol import ClientRequest, Note, Result
from bhandar_cli.host import Call, LatencyModel, Network, NetworkModel, NodeHost, node_names, zone_map
from bhandar_cli.sim.loop import EventLoop
from bhandar_cli.sim.stepper import SimStepper

SEEDS = 2  # nodes whose addresses every node boots with (the way back in after a move)


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
    # Seconds an fsync takes, drawn per sync (None: syncs take no simulated time).
    sync_delay: Callable[[Random], float] | None = None
    # Seconds a background flush or compaction takes to build its table, drawn per job.
    job_delay: Callable[[Random], float] = lambda _rng: 0.0
    addressing: bool = False  # boot as node processes do: seeds by address, no initial ring
    moves: float = 0.3  # with addressing: the chance that a revived node listens at a new address

    def __post_init__(self) -> None:
        self.rng = Random(self.seed)
        self.loop = EventLoop()
        names = node_names(self.nodes)
        self.ring = Ring.build(names, self.vnodes, zone_map(names, self.zones))
        self.model = NetworkModel(Random(self.rng.getrandbits(64)), self.latency)
        self.model.loss, self.model.duplicate = self.loss, self.duplicate
        self.net = Network(self.model, self._schedule, self._deliver)
        self._address_rng = Random(self.rng.getrandbits(64))
        self._host_at: dict[str, str] = {}  # address -> host listening there (with addressing)
        self._client_rng = Random(self.rng.getrandbits(64))
        self._disk_rng = Random(self.rng.getrandbits(64))
        self.hosts: dict[str, NodeHost] = {}
        self._steppers: dict[str, SimStepper] = {}
        # Hosts in service, in the order they were added: a retired host (decommissioned and shut
        # down) is left out and never revived. Replaced, never mutated, so holders see a snapshot.
        self.members: list[str] = list(names)
        self.retired: set[str] = set()
        self.notes: list[tuple[float, str, Note]] = []
        self.internal_errors: list[tuple[float, str, str]] = []  # (time, node, error): bugs
        self._waiters: dict[int, Callable[[Result], None]] = {}  # by rid: clients waiting
        self._arrived: dict[int, tuple[NodeHost, int]] = {}  # by rid: where it runs, its ticket
        self._next_rid = 1
        self._unsettled = ""  # the host `membership_settled` last found missing a peer
        for name in names:
            self._new_host(name, self.ring.zones[name])
        self._seed_addresses: set[str] = set()
        self.address_moves = 0
        if self.addressing:
            seeds = [self.hosts[n].boot.address for n in names[:SEEDS]]
            self._seed_addresses = set(seeds)
            for name in names:
                host = self.hosts[name]
                host.boot = replace(host.boot, seeds=tuple(a for a in seeds if a != host.boot.address))
        for name in names:
            self._steppers[name].start()

    @property
    def now(self) -> float:
        return self.loop.now

    def _schedule(self, delay: float, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.loop.push(self.loop.now + delay, fn, args)

    def _new_host(self, name: str, zone: str) -> NodeHost:
        seed = self.rng.getrandbits(64)
        ring = Ring.build([name], self.vnodes, {name: zone}) if self.addressing else self.ring
        send = self._send_by_address if self.addressing else self.net.send
        host = NodeHost(
            name=name,
            zone=zone,
            ring=ring,
            store=self.store_factory(name),
            config=self.config,
            seed=seed,
            send=send,
            on_note=self._note,
            fatal=self.crash_errors,
            clock=lambda: self.loop.now,
        )
        if self.addressing:
            host.boot = NodeBoot(zone=zone, seeds=())
            self._listen(host, f"10.0.{len(self.hosts) // 250}.{len(self.hosts) % 250 + 1}:7000")
        self.hosts[name] = host
        self._steppers[name] = SimStepper(
            self.loop,
            host,
            lambda: self.kill(name),
            lambda error: self.internal_errors.append((self.loop.now, name, error)),
            self.crash_errors,
            self.sync_delay,
            self._disk_rng,
            self.job_delay,
        )
        return host

    def _listen(self, host: NodeHost, address: str) -> None:
        """The host listens at `address` from its next boot on (its old address leads nowhere)."""
        self._host_at.pop(host.boot.address, None)
        self._host_at[address] = host.name
        host.boot = replace(host.boot, address=address)

    def _send_by_address(self, src: str, dst: str, msg: Any) -> None:
        """Route as a node process does: a seed by its address, a peer by the address the
        sender's membership table gives. A message to an address where nobody listens is lost."""
        address = dst if ":" in dst else self.hosts[src].address_of(dst)
        target = self._host_at.get(address)
        if target is None:
            self.model.sent += 1
            self.model.dropped += 1
            return
        self.net.send(src, target, msg)

    def membership_settled(self) -> bool:
        """Has every live node heard from every other live one in its current life?"""
        live = [h for h in self.hosts.values() if h.node is not None]
        # Asked after every event while a cluster boots: look first at the host that was missing a
        # peer last time (it usually still is), so a 240-node cluster is not checked all through.
        last = self.hosts.get(self._unsettled)
        for host in ([last] if last is not None and last.node is not None else []) + live:
            node = host.node
            assert node is not None
            if not all(node.has_heard(other.name) for other in live):
                self._unsettled = host.name
                return False
        return True

    def _note(self, name: str, note: Note) -> None:
        self.notes.append((self.loop.now, name, note))

    def _deliver(self, dst: str, src: str, msg: Any) -> bool:
        host = self.hosts.get(dst)
        return host is not None and host.deliver(src, msg)

    # --- clients -----------------------------------------------------------------------------

    def new_rid(self) -> int:
        rid = self._next_rid
        self._next_rid += 1
        return rid

    def submit(
        self, via: str, request: ClientRequest, on_result: Callable[[Result], None], delay: float = 0.0
    ) -> int:
        """Send a client request to node `via` after `delay` seconds; `on_result` runs when (if) the
        answer arrives. Returns its ticket for `forget`: the request's `rid`, which must be new
        (`new_rid`)."""
        self._waiters[request.rid] = on_result
        self.loop.call_later(
            delay + self.latency.sample(self._client_rng), self._client_arrives, via, request
        )
        return request.rid

    def _client_arrives(self, via: str, request: ClientRequest) -> None:
        host = self.hosts[via]
        if not host.alive:
            return  # a dead node never answers; the client times out
        rid = request.rid
        ticket = host.submit(request, lambda result: self._answer(rid, result))
        if rid in self._waiters:
            self._arrived[rid] = (host, ticket)
        else:  # the client gave up while it travelled: it runs all the same, and nobody waits
            host.forget(ticket)

    def _answer(self, rid: int, result: Result) -> None:
        self._arrived.pop(rid, None)
        waiter = self._waiters.pop(rid, None)
        if waiter is not None:
            self.loop.call_later(self.latency.sample(self._client_rng), waiter, result)

    def call(self, via: str, request: ClientRequest, timeout: float = 5.0) -> Result:
        """Submit and run the simulation until the answer arrives or the client gives up."""
        pending = Call(partial(self.submit, via), self.forget, request, lambda: None)
        self.loop.run_until_true(lambda: pending.result is not None, self.loop.now + timeout)
        return pending.outcome(via, timeout)

    def forget(self, rid: int) -> None:
        """Stop waiting for a request (the client gave up on it): it is forgotten where it went."""
        self._waiters.pop(rid, None)
        arrived = self._arrived.pop(rid, None)
        if arrived is not None:
            host, ticket = arrived
            host.forget(ticket)

    # --- faults ------------------------------------------------------------------------------

    def kill(self, name: str) -> None:
        """Crash the host: the node's memory is lost, and so is its store's unsynced state."""
        host = self.hosts[name]
        if not host.alive:
            return
        host.kill()
        self._steppers[name].halt()
        if self.crash_store is not None:
            self.crash_store(name, host.store)

    def crash_during_io(self, name: str) -> bool:
        """Make the host crash inside one of its next disk writes (False: its store cannot)."""
        host = self.hosts[name]
        if self.arm_crash is None or not host.alive:
            return False
        self.arm_crash(name, host.store)
        return True

    def revive(self, name: str) -> None:
        host = self.hosts[name]
        if not host.alive and name not in self.retired:
            if self.reopen_store is not None:
                host.store = self.reopen_store(name, host.store)
            # Seeds keep their addresses (that is what makes them seeds: the way back in for a
            # node whose peers all moved); any other node may come back on another port.
            seed = host.boot.address in self._seed_addresses
            if self.addressing and not seed and self._address_rng.random() < self.moves:
                ip, _, port = host.boot.address.rpartition(":")
                self._listen(host, f"{ip}:{int(port) + 1}")  # restarted on another port
                self.address_moves += 1
            self._steppers[name].start()

    def retire(self, name: str) -> None:
        """Shut a host down for good (after it left the ring): a clean stop, its store synced."""
        host = self.hosts[name]
        if host.alive:
            host.store.sync()
            host.kill("was shut down")
        self._steppers[name].halt()
        self.retired.add(name)
        self.members = [n for n in self.members if n != name]
        if self.addressing:
            self._keep_seeds()

    def _keep_seeds(self) -> None:
        """After a seed left, name members in service as seeds (they keep their addresses from now
        on) and give every node the new list, as an operator edits the seed list. Without it, once
        every seed had left and every other node had restarted on a new port, no node knew where any
        other listened: a join waited forever (found by `bhandar chaos --seed 7100017 --ops 3000
        --faults all`)."""
        serving = [self.hosts[n].boot.address for n in self.members]
        seeds = [a for a in serving if a in self._seed_addresses]
        seeds += [a for a in serving if a not in seeds][: max(0, SEEDS - len(seeds))]
        self._seed_addresses = set(seeds)
        for host in self.hosts.values():
            host.boot = replace(host.boot, seeds=tuple(a for a in seeds if a != host.boot.address))

    def add_node(self, name: str, zone: str | None = None) -> None:
        """Start a new node that bootstraps into the ring (it announces itself joining)."""
        if name in self.hosts:
            raise ValueError(f"node {name} already exists")
        zones = sorted(set(self.ring.zones.values()))
        chosen = zone or zones[len(self.hosts) % len(zones)]
        live = [n for n, h in self.hosts.items() if h.alive]
        host = self._new_host(name, chosen)
        seeds = self._join_seeds() if self.addressing else live
        tokens = tuple(node_tokens(name, self.vnodes))
        host.boot = replace(host.boot, status="joining", seeds=tuple(seeds), zone=chosen, tokens=tokens)
        self.members = [*self.members, name]
        self._steppers[name].start()

    def _join_seeds(self) -> list[str]:
        """The seed addresses a new node is given: the seeds still in service, or, once every seed
        has been decommissioned, the addresses of the members in service (as an operator would
        name them). Retired seeds led a joining node nowhere: it found nobody and stayed alone."""
        serving = {self.hosts[n].boot.address for n in self.members}
        seeds = sorted(self._seed_addresses & serving)
        return seeds or sorted(serving)

    def status_of(self, name: str, seen_by: str | None = None) -> str:
        """A member's status as `seen_by` (default: the member itself) knows it."""
        node = self.hosts[seen_by or name].node
        return "unknown" if node is None else node.status_of(name)

    def is_alive(self, name: str) -> bool:
        return self.hosts[name].alive

    def run_for(self, seconds: float) -> None:
        self.loop.run_until(self.loop.now + seconds)

    # --- views for tools and checkers ----------------------------------------------------------

    def metrics(self) -> NodeMetrics:
        """Every node's counters merged, including those of lives that ended in a crash."""
        total = NodeMetrics()
        for host in self.hosts.values():
            total.merge(host.metrics())
        return total

    def hints_pending(self) -> int:
        """Hints held anywhere (read from the durable stores, so dead and retired holders count too,
        except a crashed simulated disk: it is readable again once its host restarts)."""
        crashed = self.crash_store is not None
        return sum(
            1
            for name, host in self.hosts.items()
            if not (crashed and not host.alive and name not in self.retired)
            for _ in host.store.hints()
        )

    def ring_view(self) -> Ring:
        """The ring as the first live member sees it (gossip's view), else the initial one."""
        for name in self.members:
            node = self.hosts[name].node
            if node is not None:
                return node.ring
        return self.ring
