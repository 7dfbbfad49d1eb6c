"""An in-process cluster: N node runtimes on one trio loop over the in-memory network.

Nodes are A, B, C, ... in zones z1, z2, z3, ... round-robin. The cluster owns the faults a person
can inject (partition, heal, kill, revive, delay) and the stores, which outlive a killed node.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from random import Random
from typing import Any

import trio

from bhandar_cli.core.config import NodeConfig
from bhandar_cli.core.messages import ClientRequest, Failure, Note, Result
from bhandar_cli.core.ring import Ring, node_tokens
from bhandar_cli.core.store import MemoryStore, Store
from bhandar_cli.node.memnet import MemoryNetwork
from bhandar_cli.node.runtime import NodeRuntime
from bhandar_cli.sim.cluster import node_names, zone_map
from bhandar_cli.sim.network import LatencyModel


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
        if not 1 <= nodes <= 26:
            raise ValueError(f"--nodes must be between 1 and 26 (got {nodes})")
        self.names = node_names(nodes)
        self.zones = zone_map(self.names, zones)
        self.vnodes = vnodes
        self.ring = Ring.build(self.names, vnodes, self.zones)
        self.config = config or NodeConfig()
        rng = Random(seed)
        self.network = MemoryNetwork(Random(rng.getrandbits(64)), latency)
        self.network.attach(self._deliver)
        make_store = store_factory or (lambda _name: MemoryStore())
        self._make_store = make_store
        self._rng = rng
        # What nodes noticed (peers down or up, joins); bounded, the REPL drains it.
        self.notes: deque[tuple[float, str, Note]] = deque(maxlen=1000)
        self.runtimes: dict[str, NodeRuntime] = {
            name: NodeRuntime(
                name,
                self.zones[name],
                self.ring,
                make_store(name),
                self.config,
                rng.getrandbits(64),
                self.network.send,
                self._note,
            )
            for name in self.names
        }
        self._nursery: trio.Nursery | None = None
        self._next_rid = 1

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start every node, report ready, then run until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.network.run)
            for runtime in self.runtimes.values():
                await nursery.start(runtime.run)
            task_status.started()

    def _deliver(self, dst: str, src: str, msg: Any) -> bool:
        runtime = self.runtimes.get(dst)
        return runtime is not None and runtime.deliver(src, msg)

    def _note(self, name: str, note: Note) -> None:
        self.notes.append((trio.current_time(), name, note))

    def runtime(self, name: str) -> NodeRuntime:
        try:
            return self.runtimes[name]
        except KeyError:
            raise KeyError(f"unknown node {name!r} (nodes are {', '.join(self.names)})") from None

    # --- requests ------------------------------------------------------------------------------

    def new_rid(self) -> int:
        rid = self._next_rid
        self._next_rid += 1
        return rid

    async def request(self, via: str, request: ClientRequest, timeout: float) -> Result:
        runtime = self.runtime(via)
        box: list[Result] = []
        done = trio.Event()

        def respond(result: Result) -> None:
            box.append(result)
            done.set()

        runtime.submit(request, respond)
        try:
            with trio.move_on_after(timeout):
                await done.wait()
        finally:
            if not box:
                runtime.forget(request.rid)
        if not box:
            return Failure("timeout", f"no answer from {via} within {timeout:g} s")
        return box[0]

    # --- faults --------------------------------------------------------------------------------

    def kill(self, name: str) -> bool:
        runtime = self.runtime(name)
        if not runtime.alive:
            return False
        runtime.kill()
        return True

    async def revive(self, name: str, reopen: bool = True) -> bool:
        runtime = self.runtime(name)
        if runtime.alive:
            return False
        assert self._nursery is not None, "the cluster is not running"
        reopen_store = getattr(runtime.store, "reopen", None) if reopen else None
        if reopen_store is not None:
            reopen_store()  # a restarted node reads its data back from disk (WAL replay)
        await self._nursery.start(runtime.run)
        return True

    async def add_node(self, name: str, zone: str | None = None, store: Store | None = None) -> NodeRuntime:
        """Start a new node that bootstraps into the ring (status joining, then normal)."""
        if name in self.runtimes:
            raise ValueError(f"node {name} already exists")
        assert self._nursery is not None, "the cluster is not running"
        zones = sorted(set(self.zones.values()))
        chosen = zone or zones[len(self.names) % len(zones)]
        runtime = NodeRuntime(
            name,
            chosen,
            self.ring,
            store if store is not None else self._make_store(name),
            self.config,
            self._rng.getrandbits(64),
            self.network.send,
            self._note,
        )
        live = [n for n, rt in self.runtimes.items() if rt.alive]
        runtime.boot = {
            "status": "joining",
            "seeds": live,
            "zone": chosen,
            "tokens": tuple(node_tokens(name, self.vnodes)),
        }
        self.runtimes[name] = runtime
        self.names.append(name)
        self.zones[name] = chosen
        await self._nursery.start(runtime.run)
        return runtime

    def retire(self, name: str) -> None:
        runtime = self.runtime(name)
        if runtime.alive:
            runtime.kill()
        del self.runtimes[name]
        self.names.remove(name)
        self.zones.pop(name, None)

    def partition(self, groups: list[list[str]]) -> list[list[str]]:
        for group in groups:
            for name in group:
                self.runtime(name)
        return self.network.partition(groups, self.names)

    def heal(self) -> None:
        self.network.heal()

    def delay(self, name: str, ms: float) -> None:
        self.runtime(name)
        if ms <= 0:
            self.network.extra_delay.pop(name, None)
        else:
            self.network.extra_delay[name] = ms / 1000.0
