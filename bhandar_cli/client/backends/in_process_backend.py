"""The in-process backend of `Client`: an `InProcessCluster` seen through the `Backend` protocol
(client/backend.py). Its nodes run in this process, so they are stopped and started in place and
speak this process's wire protocol; they have a storage engine unless the cluster keeps its data
in memory."""

from __future__ import annotations

import os
import time
from typing import Any

import trio

from bhandar_cli.client.backend import Capabilities, RestoreDone, SnapshotDone
from bhandar_cli.client.membership import ASK_EVERY, ClusterMembership, merge_tables
from bhandar_cli.core import HintQueueRow, Node, NodeInfo
from bhandar_cli.core.membership import MemberRow, Ring
from bhandar_cli.core.model import BadInput, NodeMetrics, Record, Unavailable
from bhandar_cli.core.protocol import NodeOperation, Result
from bhandar_cli.fleet import InProcessCluster
from bhandar_cli.node import convergence_problems as admin_convergence_problems
from bhandar_cli.node import convergence_ranges
from bhandar_cli.node import node_info as admin_node_info
from bhandar_cli.store import RecordStore


class InProcessBackend:
    def __init__(self, cluster: InProcessCluster, data_dir: str | None = None) -> None:
        self.cluster = cluster
        self.names: list[str] = cluster.names
        self.zones: dict[str, str] = cluster.zones
        self.data_dir = data_dir
        self.capabilities = Capabilities(storage_engine=not cluster.memory_only, node_processes=False)
        self._membership: tuple[float, ClusterMembership] | None = None  # (asked at, merged)

    @property
    def replicas(self) -> int:
        return self.cluster.config.default_n

    @property
    def ring(self) -> Ring:
        """The current ring as a live node's gossip sees it (the boot ring if none is up)."""
        for name in self.names:
            node = self.cluster.host(name).node
            if node is not None and node.status == "normal":
                return node.ring
        return self.cluster.ring

    async def drain_notes(self) -> list[tuple[str, dict[str, Any], str]]:
        """Notes the nodes made since the last call: (text, data, node)."""
        notes = list(self.cluster.notes)
        self.cluster.notes.clear()
        return [(note.text, note.data, node) for _, node, note in notes]

    def now(self) -> float:
        return trio.current_time()

    def is_alive(self, name: str) -> bool:
        return self.cluster.host(name).alive

    def new_rid(self) -> int:
        return self.cluster.new_rid()

    def partitions(self) -> list[list[str]]:
        return [list(g) for g in self.cluster.model.groups]

    async def request(self, via: str, request: Any, timeout: float) -> Result:
        return await self.cluster.request(via, request, timeout)

    def _node(self, name: str) -> Node | None:
        return self.cluster.host(name).node

    async def node_info(self, name: str, counts: bool = True) -> NodeInfo:
        host = self.cluster.host(name)
        tokens = len(self.ring.tokens_by_node().get(name, []))
        info = admin_node_info(name, host.zone, host.node, trio.current_time(), tokens, counts)
        if host.crash_reason is not None and host.node is None:
            info["crashed"] = host.crash_reason
        return info

    async def node_records(self, name: str, keyspace: str, key: str) -> tuple[Record | None, Record | None]:
        node = self._node(name)
        if node is None:
            return None, None
        return node.records(keyspace, key)

    async def node_hints(self, name: str) -> list[HintQueueRow]:
        node = self._node(name)
        return [] if node is None else node.hints_summary(trio.current_time())

    async def node_metrics(self, name: str) -> NodeMetrics:
        return self.cluster.host(name).metrics()

    async def node_members(self, name: str, placement: bool = False) -> list[MemberRow]:
        node = self._node(name)
        return [] if node is None else node.members(trio.current_time(), placement)

    async def membership(self) -> ClusterMembership:
        """Every running node's table merged (client/membership.py); asked again after a second,
        or at once after a kill, revive, add or retire here."""
        now = trio.current_time()
        if self._membership is None or now - self._membership[0] >= ASK_EVERY:
            tables = {
                name: host.node.member_states()
                for name, host in self.cluster.hosts.items()
                if host.node is not None
            }
            self._membership = (now, merge_tables(tables))
        return self._membership[1]

    async def node_tree(self, name: str, keyspace: str, lo: int, hi: int) -> list[list[Any]]:
        node = self._node(name)
        return [] if node is None else node.tree_entries(keyspace, lo, hi)

    async def kill(self, name: str) -> bool:
        self._membership = None
        return self.cluster.kill(name)

    async def revive(self, name: str, protocol: int | None = None) -> bool:
        if protocol is not None:
            raise BadInput(
                "in-process nodes speak this process's wire protocol: only node processes start at another"
            )
        self._membership = None
        return await self.cluster.revive(name)

    async def stop_node(self, name: str) -> str:
        """As `kill`: an in-process node has no drain of its own; it stops at once and its store
        outlives it (it starts again as after a crash)."""
        await self.kill(name)
        return "stopped"

    def protocol_of(self, name: str) -> int | None:
        return None  # this process's

    async def add_node(self, name: str, zone: str | None) -> str:
        host = await self.cluster.add_node(name, zone)
        self._membership = None
        return host.zone

    async def retire(self, name: str) -> None:
        """Stop a node that has left the ring and forget it (its data directory is set aside)."""
        await self.cluster.retire(name)
        self._membership = None
        if self.data_dir is not None:
            from bhandar_cli.fleet import retire_node_dir

            retire_node_dir(self.data_dir, name)

    def save_config(self, plain: dict[str, Any]) -> None:
        """Nothing to keep: an in-process cluster has no cluster file, and lives as long as its
        session (a revived node comes back with the configuration it had)."""

    async def set_node_config(self, name: str, plain: dict[str, Any]) -> dict[str, Any]:
        """Apply a version of the cluster configuration on node `name` now (node/reconfigure.py)."""
        from bhandar_cli.node import apply_live

        return apply_live(self.cluster.host(name), plain)

    def issuers(self) -> tuple[str, ...]:
        return ()  # no CA: nothing is sealed

    async def remove_member(self, name: str) -> str:
        """A cluster without a CA: any live node but `name` may seal the removal."""
        for other in self.names:
            host = self.cluster.host(other)
            if other != name and self.is_alive(other) and host.node is not None:
                host.node.remove_member(name, self.now())
                return other
        raise Unavailable(f"no live node but {name} to remove it")

    async def partition(self, groups: list[list[str]]) -> list[list[str]]:
        return self.cluster.partition(groups)

    async def heal(self) -> None:
        self.cluster.heal()

    async def delay(self, name: str, ms: float) -> None:
        self.cluster.delay(name, ms)

    # --- storage ---------------------------------------------------------------------------------

    def _store(self, name: str) -> RecordStore:
        store = self.cluster.host(name).store
        if not self.capabilities.storage_engine:
            raise BadInput("this cluster keeps its data in memory: there is no storage engine to work on")
        assert isinstance(store, RecordStore)  # what the cluster's store factory makes
        return store

    async def run_on_node(self, operation: NodeOperation, name: str) -> dict[str, Any]:
        started = time.perf_counter()
        value = operation.run(self._store(name))
        return {"node": name, operation.result: value, "ms": round((time.perf_counter() - started) * 1000, 3)}

    def _snapshot_dir(self, snapshot: str) -> str:
        if self.data_dir is None:
            raise BadInput("snapshots need a data directory (bhandar repl --data-dir DIR)")
        return os.path.join(self.data_dir, "snapshots", snapshot)

    async def snapshot(self, snapshot: str, to: str | None = None) -> SnapshotDone:
        """Every live node's tables, hard-linked under the data directory's snapshots/NAME, or
        copied to TO/NAME (snapshots/NAME/LOCATION then says where); the WALs are archived there."""
        from bhandar_cli.store import LOCATION

        local = os.path.abspath(self._snapshot_dir(snapshot))  # the store keeps it in its ARCHIVES
        base = os.path.join(os.path.abspath(to), snapshot) if to else local
        if os.path.exists(local) or os.path.exists(base):
            raise BadInput(f"snapshot {snapshot} already exists")
        started = time.perf_counter()
        if to:
            os.makedirs(local)
            with open(os.path.join(local, LOCATION), "w") as f:
                f.write(base)
        files = 0
        for name in self.names:
            if self.cluster.host(name).alive:
                files += len(self._store(name).snapshot(os.path.join(base, name), copy=bool(to)))
        ms = round((time.perf_counter() - started) * 1000, 3)
        return {"name": snapshot, "files": files, "ms": ms, "to": base if to else None}

    async def restore(self, snapshot: str, until: float | None = None) -> RestoreDone:
        """Stop every node, put the snapshot's tables and the archived writes up to `until` in
        place, start them again as new actors. The files are verified before anything stops."""
        from pathlib import Path

        from bhandar_cli.store import (
            open_node_store,
            restore_node_dir,
            restore_summary,
            snapshot_home,
            verify_snapshot,
        )

        local = self._snapshot_dir(snapshot)
        if not os.path.isdir(local):
            raise BadInput(f"no snapshot named {snapshot}")
        assert self.data_dir is not None
        started = time.perf_counter()
        home = snapshot_home(Path(local))
        base = str(home)
        names = [n for n in self.names if os.path.isdir(os.path.join(base, n))]
        verified = verify_snapshot(home, names, until)
        splits = {}
        for name in names:  # every node down first: no live node may stream newer data back
            self.cluster.kill(name)
        restored = []
        for name in names:
            host = self.cluster.host(name)
            await self.cluster.runners[name].stopped()
            host.store.close()
            target = os.path.join(self.data_dir, name)
            splits[name] = restore_node_dir(os.path.join(base, name), target, name, until)
            host.store = open_node_store(target)
            restored.append(name)
        for name in restored:
            await self.cluster.revive(name, reopen=False)
        return {
            "name": snapshot,
            "nodes": restored,
            "ms": round((time.perf_counter() - started) * 1000, 3),
            "verified_files": verified,
            **restore_summary(home, splits, until),
        }

    async def convergence_problems(self) -> list[str]:
        """Why the cluster is not yet converged (empty when it is)."""
        live = {n: h.node for n, h in self.cluster.hosts.items() if h.node is not None}
        moving = [n for n, node in live.items() if node.moving]
        problems = [f"{moving[0]} sees a node joining or leaving"] if moving else []
        now = trio.current_time()
        replication = {ks.name: ks.n for node in live.values() for ks in node.keyspaces.values()}
        return problems + admin_convergence_problems(
            self.ring,
            {n: node.hints_summary(now) for n, node in live.items()},
            {n: node.range_hashes(convergence_ranges(self.ring)) for n, node in live.items()},
            replication,
            self.cluster.config.default_n,
        )
