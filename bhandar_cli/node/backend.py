"""The in-process backend of `client.Client`: an `InProcessCluster` seen through the Backend API."""

from __future__ import annotations

from typing import Any

import trio

from bhandar_cli.core.messages import Result
from bhandar_cli.core.metrics import NodeMetrics
from bhandar_cli.core.records import Record
from bhandar_cli.core.ring import Ring, key_token
from bhandar_cli.node import admin
from bhandar_cli.node.cluster import InProcessCluster


class InProcessBackend:
    def __init__(self, cluster: InProcessCluster) -> None:
        self.cluster = cluster
        self.names: list[str] = cluster.names
        self.zones: dict[str, str] = cluster.zones
        self.ring: Ring = cluster.ring

    def now(self) -> float:
        return trio.current_time()

    def is_alive(self, name: str) -> bool:
        return self.cluster.runtime(name).alive

    def new_rid(self) -> int:
        return self.cluster.new_rid()

    def partitions(self) -> list[list[str]]:
        return [list(g) for g in self.cluster.network.groups]

    async def request(self, via: str, request: Any, timeout: float) -> Result:
        return await self.cluster.request(via, request, timeout)

    async def node_info(self, name: str) -> dict[str, Any]:
        runtime = self.cluster.runtime(name)
        tokens = len(self.ring.tokens_by_node().get(name, []))
        return admin.node_info(name, runtime.zone, runtime.node, trio.current_time(), tokens)

    async def node_records(self, name: str, keyspace: str, key: str) -> tuple[Record | None, Record | None]:
        node = self.cluster.runtime(name).node
        if node is None:
            return None, None
        return node.local_record(keyspace, key), node.hinted_record(keyspace, key)

    async def node_hints(self, name: str) -> list[dict[str, Any]]:
        node = self.cluster.runtime(name).node
        return [] if node is None else admin.node_hints(node, trio.current_time())

    async def node_metrics(self, name: str) -> NodeMetrics:
        node = self.cluster.runtime(name).node
        return NodeMetrics() if node is None else node.metrics

    async def kill(self, name: str) -> bool:
        return self.cluster.kill(name)

    async def revive(self, name: str) -> bool:
        return await self.cluster.revive(name)

    async def partition(self, groups: list[list[str]]) -> list[list[str]]:
        return self.cluster.partition(groups)

    async def heal(self) -> None:
        self.cluster.heal()

    async def delay(self, name: str, ms: float) -> None:
        self.cluster.delay(name, ms)

    async def convergence_problems(self) -> list[str]:
        """Why the cluster is not yet converged (empty when it is)."""
        problems: list[str] = []
        live = {n: rt.node for n, rt in self.cluster.runtimes.items() if rt.node is not None}
        for name, node in live.items():
            for summary in node.hints.summary(trio.current_time()):
                if summary.target in live:
                    problems.append(f"{name} holds {summary.count} hint(s) for {summary.target}")
        keys: set[tuple[str, str]] = set()
        for node in live.values():
            for keyspace in node.store.keyspaces():
                keys.update((keyspace, k) for k, _ in node.store.items(keyspace))
        for keyspace, key in sorted(keys):
            n = next(iter(live.values())).keyspaces.get(keyspace)
            replicas = self.ring.preference_list(key_token(keyspace, key), n.n if n else 3)
            copies = [live[r].store.get(keyspace, key) for r in replicas if r in live]
            if any(c != copies[0] for c in copies[1:]):
                problems.append(f"replicas of {keyspace}/{key} differ")
        return problems
