"""Cluster operations of the client: faults, membership changes, keyspaces, repair, storage
housekeeping, and the operations of client/procedures/ (rolling upgrade, configuration rollout).

Each returns a dictionary in the JSON shape the man page lists under JSON OUTPUT (with more fields
where useful) or raises `ClientError`/`BadInput` with a sentence saying what went wrong and whose
fault it is.
trio and the Merkle modules are imported where they are used: one-shot data commands import
client.py, and with it this module, without starting trio.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from bhandar_cli.client.view_disagreement import disagreeing, why_views_differ
from bhandar_cli.core.membership import MemberRow
from bhandar_cli.core.model import (
    NEW_NODE_NAME,
    NEW_NODE_NAME_RULE,
    BadInput,
    ClientError,
    KeyspaceDef,
    check_snapshot_name,
    parse_ttl,
)
from bhandar_cli.core.protocol import (
    NODE_OPERATIONS,
    DecommissionRequest,
    Failure,
    KeyspaceRequest,
    KeyspaceResult,
    MoveResult,
    RepairRequest,
    RepairResult,
)
from bhandar_cli.core.roles import StreamsView

if TYPE_CHECKING:
    from bhandar_cli.client.backend import Backend
    from bhandar_cli.client.cluster_views import ClusterViews
    from bhandar_cli.client.data_client import DataClient
    from bhandar_cli.client.procedures.upgrade import Progress

MOVE_TIMEOUT = 120.0
QUIESCE_TIMEOUT = 10.0  # seconds a restore waits for replication and hints to settle


# The `members` view: one node's membership table, and where the live nodes' tables disagree.
# "from" is a keyword, hence the functional form.
MembersView = TypedDict(
    "MembersView",
    {
        "cmd": Literal["members"],
        "ok": bool,
        "from": str,  # whose table it is
        "members": list[MemberRow],
        "disagree": list[str],  # members the live nodes' views disagree about
        "why": dict[str, str],  # for each of them, what the facts and the views show
    },
)


class ClusterAdmin:
    """The operations, over one backend; node names are checked as the data client checks them,
    and what the cluster looks like is asked of the views."""

    def __init__(self, backend: Backend, data: DataClient, views: ClusterViews) -> None:
        self.backend = backend
        self.data = data
        self.views = views

    def node(self, name: str) -> str:
        return self.data.node(name)

    async def partition(self, groups: list[list[str]]) -> dict[str, Any]:
        clean = [[self.node(n) for n in group] for group in groups if group]
        seen = [n for g in clean for n in g]
        if len(seen) != len(set(seen)):
            raise BadInput("a node appears in two partition groups")
        if not clean:
            raise BadInput("partition needs groups, e.g. partition A | B C")
        if len(clean) == 1 and set(seen) >= set(self.backend.names):
            raise BadInput(
                f"partition {' '.join(seen)} names one group holding every node: that splits nothing "
                "(separate the groups with |, e.g. partition A B | C D E)"
            )
        result = await self.backend.partition(clean)
        return {"cmd": "partition", "ok": True, "groups": result}

    async def heal(self) -> dict[str, Any]:
        await self.backend.heal()
        return {"cmd": "heal", "ok": True}

    async def kill(self, name: str) -> dict[str, Any]:
        node = self.node(name)
        changed = await self.backend.kill(node)
        return {"cmd": "kill", "ok": True, "node": node, "changed": changed}

    async def revive(self, name: str) -> dict[str, Any]:
        node = self.node(name)
        changed = await self.backend.revive(node)
        return {"cmd": "revive", "ok": True, "node": node, "changed": changed}

    async def delay(self, name: str, ms: float) -> dict[str, Any]:
        node = self.node(name)
        if not 0 <= ms <= 60_000:
            raise BadInput(f"delay must be between 0 and 60000 ms (got {ms:g})")
        await self.backend.delay(node, ms)
        return {"cmd": "delay", "ok": True, "node": node, "ms": ms}

    async def sleep(self, seconds: float) -> dict[str, Any]:
        import trio

        await trio.sleep(seconds)
        return {"cmd": "sleep", "ok": True, "seconds": seconds}

    async def wait_converged(self, timeout: float = 30.0) -> dict[str, Any]:
        import trio

        start = self.backend.now()
        problems: list[str] = []
        with trio.move_on_after(timeout):
            while True:
                problems = await self.backend.convergence_problems()
                if not problems:
                    return {"cmd": "wait", "ok": True, "waited_s": round(self.backend.now() - start, 3)}
                await trio.sleep(0.1)
        shown = "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
        raise ClientError("timeout", f"not converged after {timeout:g} s: {shown}")

    # --- keyspaces -----------------------------------------------------------------------------

    async def keyspace_create(
        self,
        name: str,
        policy: str = "siblings",
        n: int | None = None,
        quorum: str = "sloppy",
        ttl: str | int = 0,
    ) -> dict[str, Any]:
        """Create a keyspace; `ttl` in seconds, or as text (`60s`, `5m`, `2h`, `1d`)."""
        default_n = 3
        info = await self.views.any_info()
        if info.get("keyspaces"):
            default_n = next((k["n"] for k in info["keyspaces"] if k["name"] == "counters"), 3)
        seconds = parse_ttl(ttl) if isinstance(ttl, str) else ttl
        definition = KeyspaceDef(name, policy, default_n if n is None else n, quorum, seconds)
        if definition.n > len(self.backend.names):
            raise BadInput(
                f"n={definition.n} is more than the {len(self.backend.names)} nodes of this cluster"
            )
        # An issuing node first: it seals the definition, so that no member can change it later
        # (core/model/keyspaces.py); another node creates it unsealed.
        order = [*self.backend.issuers(), *self.backend.names]
        via = next((x for x in order if self.backend.is_alive(x)), None)
        if via is None:
            raise ClientError("unavailable", "every node is down; revive one first")
        result = await self.data.call(via, KeyspaceRequest(self.backend.new_rid(), definition))
        assert isinstance(result, KeyspaceResult)
        await self._schema_agreed(via, name)
        # The definition as `keyspace list` shows it (core/node_views.py), and whether it is new.
        return {"cmd": "keyspace", "ok": True, **asdict(result.definition), "created": result.created}

    async def _schema_agreed(self, via: str, name: str) -> None:
        """Wait (at most the request timeout) until every live node `via` can reach knows keyspace
        `name`, as Cassandra's drivers wait for schema agreement: a put right after the create
        may go to any of them, and one that has not heard of it yet refuses it."""
        import trio

        group = next((g for g in self.backend.partitions() if via in g), self.backend.names)
        with trio.move_on_after(self.data.timeout):
            while True:
                waiting = []
                for node in group:
                    if self.backend.is_alive(node):
                        info = await self.backend.node_info(node, counts=False)
                        if name not in {k["name"] for k in info.get("keyspaces", [])}:
                            waiting.append(node)
                if not waiting:
                    return
                await trio.sleep(0.05)

    # --- membership ----------------------------------------------------------------------------

    async def members(self, seen_from: str | None = None) -> MembersView:
        """One node's gossip view; `disagree` lists members whose up/down differs between the live
        nodes' views (or that a view calls up though their process does not run), and `why` says
        for each what the facts and the views show (client/view_disagreement.py)."""
        await self.backend.membership()  # members of no cluster file are asked too
        live = [n for n in self.backend.names if self.backend.is_alive(n)]
        if not live:
            raise ClientError("unavailable", "every node is down; revive one first")
        source = self.node(seen_from) if seen_from else live[0]
        if not self.backend.is_alive(source):
            raise ClientError("unavailable", f"node {source} is down: it has no view to show")
        members = await self.backend.node_members(source)
        views = {n: {m["id"]: m for m in await self.backend.node_members(n)} for n in live}
        stopped = [n for n in self.backend.names if n not in live]
        disagree = disagreeing(views, stopped)
        groups = self.backend.partitions()
        why = {m: why_views_differ(m, views, m not in stopped, groups) for m in disagree}
        return {
            "cmd": "members",
            "ok": True,
            "from": source,
            "members": members,
            "disagree": disagree,
            "why": why,
        }

    async def add(
        self, name: str, zone: str | None = None, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Start node `name` and wait until every live node sees it normal; `progress` hears what
        its bootstrap reached (client/procedures/joining.py): its sources, and each source that is down,
        what it waits for or where that source's ranges came from instead."""
        import trio

        from bhandar_cli.client.procedures.joining import join_progress, replaced_sources, waiting_for

        if not NEW_NODE_NAME.fullmatch(name):
            raise BadInput(f"bad node name {name!r} ({NEW_NODE_NAME_RULE})")
        known = (await self.backend.membership()).members  # a node that joined by token too
        if name in self.backend.names or name in known:
            gone = name in known and known[name].status == "left"
            raise BadInput(
                f"node {name} already exists" + (" (it left: ids are never reused)" if gone else "")
            )
        if zone is not None and not re.match(r"^[A-Za-z0-9_-]{1,16}$", zone):
            raise BadInput(f"bad zone name {zone!r}")
        started = self.backend.now()
        chosen = await self.backend.add_node(name, zone)
        said: set[str] = set()
        streams: StreamsView | None = None
        joined = False
        with trio.move_on_after(MOVE_TIMEOUT):
            while not (joined := await self._seen_by_all(name, "normal")):
                if self.backend.is_alive(name):
                    streams = (await self.backend.node_info(name, counts=False)).get("streams")
                for line in join_progress(name, streams or {}):
                    if line not in said and progress is not None:
                        elapsed = self.backend.now() - started
                        progress({"what": "add", "node": name, "phase": line, "elapsed": elapsed})
                    said.add(line)
                await trio.sleep(0.1)
        if not joined:
            down = [n for n in self.backend.names if not self.backend.is_alive(n)]
            why = waiting_for(name, streams or {}, down)
            raise ClientError("timeout", f"{name} did not finish bootstrapping in {MOVE_TIMEOUT:g} s: {why}")
        info = await self.backend.node_info(name)
        streams = info.get("streams")
        received = 0 if streams is None else sum(s["received"] for s in streams["inbound"])
        return {
            "cmd": "add",
            "ok": True,
            "node": name,
            "zone": chosen,
            "keys_streamed": received,  # records: a key's range streams from each of its replicas
            "keys_held": info.get("keys"),  # the keys the new node holds once they are merged
            # sources that were down: their ranges came from their other replicas (streaming.py)
            "sources_down": replaced_sources(streams or {}),
            "seconds": round(self.backend.now() - started, 3),
        }

    async def decommission(self, name: str) -> dict[str, Any]:
        node = self.node(name)
        started = self.backend.now()
        result = await self.backend.request(node, DecommissionRequest(self.backend.new_rid()), MOVE_TIMEOUT)
        if isinstance(result, Failure):
            raise ClientError(result.code, result.error)
        assert isinstance(result, MoveResult)
        await self._everyone_sees(node, "left")
        await self.backend.retire(node)  # a node that left has nothing more to do: stop it
        return {
            "cmd": "decommission",
            "ok": True,
            "node": node,
            "keys_streamed": result.keys,
            "seconds": round(self.backend.now() - started, 3),
        }

    async def remove(self, name: str) -> dict[str, Any]:
        """Take `name` out of the cluster for good without its help (dead, or not to be trusted):
        an issuing node seals the removal, gossip spreads it, and every node calls `name` left and
        refuses its certificate from then on. Its copies are not streamed anywhere: the new
        replicas of its ranges get them from the other replicas (read repair, anti-entropy)."""
        members = await self.backend.membership()
        if name not in members.members:
            raise BadInput(f"unknown node {name!r}: no node of this cluster knows it")
        started = self.backend.now()
        by = await self.backend.remove_member(name)
        seen = await self._everyone_sees(name, "left")
        if name in self.backend.names:
            await self.backend.retire(name)  # stop it if it is ours, and forget it
        return {
            "cmd": "remove",
            "ok": True,
            "node": name,
            "by": by,
            "everyone_knows": seen,
            "seconds": round(self.backend.now() - started, 3),
        }

    async def _everyone_sees(self, node: str, status: str) -> bool:
        """Wait (bounded) until every live node's gossip view gives `node` this status."""
        import trio

        with trio.move_on_after(MOVE_TIMEOUT):
            while not await self._seen_by_all(node, status):
                await trio.sleep(0.1)
            return True
        return False

    async def _seen_by_all(self, node: str, status: str) -> bool:
        """Whether every live node but `node` gives `node` this status in its gossip view now."""
        for name in self.backend.names:
            if self.backend.is_alive(name) and name != node:
                view = {m["id"]: m["status"] for m in await self.backend.node_members(name)}
                if view.get(node) != status:
                    return False
        return True

    async def upgrade(self, to: int | None = None, progress: Any = None) -> dict[str, Any]:
        """Rolling upgrade (client/procedures/upgrade.py): one node at a time, each stopped cleanly, started
        again (at protocol `to`) and serving before the next; `progress` hears each phase."""
        from bhandar_cli.client.procedures.upgrade import RollingUpgrade

        return await RollingUpgrade(self.backend, to, progress).run()

    async def config_set(
        self, key: str, value: str, progress: Any = None, window: float | None = None
    ) -> dict[str, Any]:
        """Staged configuration change (client/procedures/config_rollout.py): one node at a time, each watched
        (errors, p99, peers) before the next; a regression rolls that node back and stops."""
        from bhandar_cli.client.procedures.config_rollout import WINDOW, ConfigRollout

        return await ConfigRollout(self.backend, key, value, progress, window or WINDOW).run()

    async def config_show(self) -> dict[str, Any]:
        """Each node's configuration version and values (client/procedures/config_rollout.py)."""
        from bhandar_cli.client.procedures.config_rollout import cluster_config

        return await cluster_config(self.backend)

    # --- anti-entropy ------------------------------------------------------------------------

    async def repair(self, name: str | None = None) -> dict[str, Any]:
        nodes = [self.node(name)] if name else [n for n in self.backend.names if self.backend.is_alive(n)]
        started = self.backend.now()
        rows: list[dict[str, Any]] = []
        for node in nodes:
            result = await self.backend.request(node, RepairRequest(self.backend.new_rid()), MOVE_TIMEOUT)
            if isinstance(result, Failure):
                raise ClientError(result.code, f"repair on {node}: {result.error}")
            assert isinstance(result, RepairResult)
            rows.append(
                {
                    "node": node,
                    "compared": result.ranges,
                    "differing": result.differing,
                    "keys": result.keys,
                    "failed": list(result.failed),
                }
            )
        return {
            "cmd": "repair",
            "ok": True,
            "nodes": rows,
            "keys": sum(r["keys"] for r in rows),
            "seconds": round(self.backend.now() - started, 3),
        }

    async def merkle(self, a: str, b: str, depth: int = 4) -> dict[str, Any]:
        """Compare two replicas range by range, as anti-entropy would (without repairing)."""
        from bhandar_cli.core.repair import MerkleTree, diff, render_lines

        first, second = self.node(a), self.node(b)
        if first == second:
            raise BadInput("merkle compares two different nodes")
        for node in (first, second):
            if not self.backend.is_alive(node):
                raise ClientError("unavailable", f"node {node} is down")
        info = await self.views.any_info()
        ring = self.backend.ring
        ranges: list[dict[str, Any]] = []
        for ks in sorted(info.get("keyspaces", []), key=lambda k: k["name"]):
            for rng in ring.ranges():
                prefs = ring.preference_list(rng.hi, ks["n"])
                if first not in prefs or second not in prefs:
                    continue
                trees = []
                for node in (first, second):
                    entries = await self.backend.node_tree(node, ks["name"], rng.lo, rng.hi)
                    trees.append(MerkleTree.build(rng.lo, rng.hi, depth, [tuple(e) for e in entries]))
                result = diff(trees[0], trees[1])
                row: dict[str, Any] = {
                    "keyspace": ks["name"],
                    "range": [rng.lo, rng.hi],
                    "equal": result.equal,
                    "keys": list(result.keys),
                }
                if not result.equal:
                    row["tree"] = render_lines(result)
                    row["hashes_compared"] = result.hashes_compared
                ranges.append(row)
        return {
            "cmd": "merkle",
            "ok": True,
            "a": first,
            "b": second,
            "ranges": ranges,
            "differing": sum(1 for r in ranges if not r["equal"]),
        }

    # --- storage -----------------------------------------------------------------------------

    async def on_nodes(self, operation: str, name: str | None = None) -> dict[str, Any]:
        """A node operation (core/protocol/node_operations.py: flush, compact) on node `name`, or on
        every live node in turn."""
        op = NODE_OPERATIONS[operation]
        nodes = [self.node(name)] if name else [n for n in self.backend.names if self.backend.is_alive(n)]
        return {"cmd": op.name, "ok": True, "nodes": [await self.backend.run_on_node(op, n) for n in nodes]}

    async def snapshot(self, name: str, to: str | None = None) -> dict[str, Any]:
        check_snapshot_name(name)  # before any directory is made, here or on a node
        if to is not None and not to.strip():
            raise BadInput("snapshot to= needs a directory")
        # Settled first: a write's last replica copy lands before the snapshot, not after it (where
        # a restore would count it as a later write).
        quiesce = await self._quiesce()
        return {"cmd": "snapshot", "ok": True, **await self.backend.snapshot(name, to), **quiesce}

    async def restore(self, name: str, until: str | None = None) -> dict[str, Any]:
        """Quiesce, restore snapshot `name` plus the archived writes up to `until` (a wall-clock
        time, core/model/timestamps.py), then repair. RTO is the whole of it: until the cluster is
        whole again."""
        import time

        from bhandar_cli.core.model import parse_moment, show_moment

        check_snapshot_name(name)
        moment = None if until is None else parse_moment(until, time.time())
        started = time.perf_counter()
        quiesce = await self._quiesce()
        restored = await self.backend.restore(name, moment)
        # A restored node holds older data: repair brings it up to date from its peers.
        repaired = await self.repair()
        return {
            "cmd": "restore",
            "ok": True,
            **restored,
            # in place: a key given again keeps its position
            "until": show_moment(restored["until"]),
            "snapshot_taken": show_moment(restored["snapshot_taken"]),
            **quiesce,
            "rto_ms": round((time.perf_counter() - started) * 1000, 3),
            "repaired_keys": repaired["keys"],
            "repair_seconds": repaired["seconds"],
        }

    async def _quiesce(self) -> dict[str, Any]:
        """Let in-flight replication and hints settle before the nodes stop (bounded): a write
        acknowledged before the restore is then on every replica, or in no restored state."""
        import time

        import trio

        started, problems = time.perf_counter(), ["not asked"]
        with trio.move_on_after(QUIESCE_TIMEOUT):
            while problems := await self.backend.convergence_problems():
                await trio.sleep(0.05)
        ms = round((time.perf_counter() - started) * 1000, 3)
        return {"quiesced": not problems, "quiesce_ms": ms, "unsettled": problems[:3]}
