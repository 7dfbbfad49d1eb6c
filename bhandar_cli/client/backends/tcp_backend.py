"""The client `Backend` (client/backend.py) over TCP to a cluster of node processes, found by its
cluster file.

Requests and admin views go through one pipelined RPC connection per node, opened on first use and
reopened after a failure. `kill` SIGKILLs the node's process group, `revive` restarts it with the
same data directory and ports; partition, heal, delay and the cluster configuration are admin RPCs
to every node, recorded in the cluster file. `add_node` starts a node process that joins (fleet/resize.py);
`retire` stops one that left and strikes it from the file. Liveness is whether the node's process
runs, re-read from the cluster file when another command changed it.

Who is in the cluster is what the nodes' gossip says (`membership`, client/membership.py): the
cluster file is where to start asking. A member of no cluster file (a node that joined with a join
token, from another machine perhaps) is reached at the address gossip gives, and is up while it
answers; this directory did not start it, so it cannot kill, restart or partition it."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TypedDict

import trio

from bhandar_cli.client.backend import Capabilities, RestoreDone, SnapshotDone
from bhandar_cli.client.membership import ASK_EVERY, LEFT, ClusterMembership, merge_tables, state_of_row
from bhandar_cli.core import HintQueueRow, NodeInfo, from_wire, to_wire
from bhandar_cli.core.membership import MemberRow, MemberState, Ring
from bhandar_cli.core.model import BadInput, ClientError, NodeMetrics, Record, Unavailable
from bhandar_cli.core.protocol import (
    ConfigArgs,
    Failure,
    InfoArgs,
    MembersArgs,
    NoArgs,
    NodeOperation,
    NotesArgs,
    RangeHashesArgs,
    RecordsArgs,
    RemoveArgs,
    Result,
    SnapshotArgs,
    TreeArgs,
    call_body,
)
from bhandar_cli.fleet import (
    STOP_TIMEOUT,
    ClusterFile,
    ClusterFileError,
    NodeEntry,
    client_access,
    kill_process,
    load,
    load_running,
    path_of,
    pid_alive,
    retire_node,
    save,
    set_faults,
    start,
    start_many,
    stop,
    wait_exit,
    with_last_words,
)
from bhandar_cli.fleet import add_node as resize_add_node
from bhandar_cli.node import NoteReader, convergence_ranges, metrics_from_plain, records_from_plain
from bhandar_cli.node import convergence_problems as admin_convergence_problems
from bhandar_cli.node import node_info as admin_node_info
from bhandar_cli.node.net import CLIENT_CODES, RpcClient, RpcError

ALIVE_CACHE = 0.2  # seconds a liveness answer is reused (the client asks per request)
ADMIN_TIMEOUT = 3.0
STORAGE_TIMEOUT = 600.0  # flush, compact, snapshot
NOTES_TIMEOUT = 0.5  # a REPL asks every few tenths of a second; a slow node is asked again soon
MEMBERS_TIMEOUT = 1.0  # for a node's members table: one that is slower counts as not answering


class NodePlacement(TypedDict):
    """Where a node runs (`placement`; `cluster status` shows it beside each node)."""

    host: str
    port: int
    http_port: int | None
    pid: int | None  # None: not started by this directory, or not running
    log: str | None
    protocol: int | None  # the wire protocol it starts with (None: this build's)
    joined: Literal["file", "token"]  # started from the cluster file, or joined with a join token


class TcpBackend:
    capabilities = Capabilities(storage_engine=True, node_processes=True)

    def __init__(self, cluster: ClusterFile, nursery: trio.Nursery) -> None:
        self.cluster = cluster
        self.names: list[str] = cluster.names
        self.zones: dict[str, str] = cluster.zones
        self.ring: Ring = Ring.build(self.names, cluster.vnodes, self.zones)
        self._nursery = nursery
        self._membership: tuple[float, ClusterMembership] | None = None  # (asked at, merged)
        self._learned: dict[str, MemberState] = {}  # members of no cluster file, as gossip has them
        self._answered: set[str] = set()  # the nodes that gave their table when last asked
        self._conns: dict[str, RpcClient] = {}
        self._locks = {name: trio.Lock() for name in self.names}
        self._alive: dict[str, tuple[float, bool]] = {}
        self._mtime = self._file_mtime()
        self._next_rid = 0
        self._starting: set[str] = set()
        self._notes = NoteReader(self._read_notes)
        self._stopping: set[str] = set()  # nodes this backend is stopping (upgrade): not routed to

    @property
    def replicas(self) -> int:
        return self.cluster.replicas

    def now(self) -> float:
        return trio.current_time()

    def new_rid(self) -> int:
        self._next_rid += 1
        return self._next_rid

    def partitions(self) -> list[list[str]]:
        return [list(g) for g in self.cluster.partitions]

    def _file_mtime(self) -> float:
        try:
            return os.stat(path_of(self.cluster.dir)).st_mtime
        except OSError:
            return 0.0

    def _reload_if_changed(self) -> None:
        mtime = self._file_mtime()
        if mtime != self._mtime:
            self._mtime = mtime
            try:
                fresh = load(self.cluster.dir)
            except ClusterFileError:
                return  # keep what we know; the next command will say what is wrong
            self._adopt(fresh)  # another command may have added or retired a node, too

    def is_alive(self, name: str) -> bool:
        if name in self._starting or name in self._stopping:
            return False  # its process exists but it does not serve (yet, or any more)
        conn = self._conns.get(name)
        if conn is not None and conn.draining and not conn.closed:
            return False  # it said it is stopping
        now = trio.current_time()
        cached = self._alive.get(name)
        if cached is not None and now - cached[0] < ALIVE_CACHE:
            return cached[1]
        self._reload_if_changed()
        if name in self._learned:  # no process of ours: up while it answers
            return name in self._answered
        alive = pid_alive(self.cluster.node(name).pid)
        self._alive[name] = (now, alive)
        return alive

    # --- membership as the nodes hold it -------------------------------------------------------

    async def membership(self) -> ClusterMembership:
        """Every reachable node's members table, merged (client/membership.py); asked at most once
        every ASK_EVERY seconds. Members the tables name that the cluster file does not are asked
        too, in a second round, at the address gossip gives."""
        if self._membership is not None and trio.current_time() - self._membership[0] < ASK_EVERY:
            return self._membership[1]
        self._reload_if_changed()
        tables: dict[str, list[MemberState]] = {}
        asked: set[str] = set()

        async def ask(name: str) -> None:
            # Down, unreachable or not answering: not one of the views.
            with trio.move_on_after(MEMBERS_TIMEOUT), contextlib.suppress(RpcError, ClientError, OSError):
                rows = await self.call(name, "members", MembersArgs(placement=True), MEMBERS_TIMEOUT)
                tables[name] = [state_of_row(row) for row in rows]

        merged = merge_tables(tables)
        for _round in range(2):  # the file's nodes, then the members they named that it does not
            todo = [n for n in self.names if n not in asked and self._may_ask(n)]
            if not todo:
                break
            asked.update(todo)
            async with trio.open_nursery() as nursery:
                for name in todo:
                    nursery.start_soon(ask, name)
            merged = merge_tables(tables)
            self._answered = set(tables)
            self._follow(merged)
        self._membership = (trio.current_time(), merged)
        return merged

    def _may_ask(self, name: str) -> bool:
        if name in self._learned:
            return name not in self._starting and name not in self._stopping
        return self.is_alive(name)

    def _follow(self, merged: ClusterMembership) -> None:
        """Names, zones and ring from the nodes' tables; the cluster file's where nobody answered.
        A member of no cluster file that has left is no longer shown (one of the file stays, left)."""
        if not merged.views:
            return  # nobody answered: keep what the nodes said last
        known = merged.members
        self._learned = {
            m.id: m
            for m in known.values()
            if m.id not in self.cluster.names and m.status != LEFT and m.address
        }
        self.names = [*self.cluster.names, *sorted(self._learned)]
        self.zones = {n: known[n].zone if n in known else self.cluster.zones[n] for n in self.names}
        for name in self._learned:
            self._locks.setdefault(name, trio.Lock())
        ring = merged.ring()
        self.ring = ring if ring is not None and len(ring) else self._file_ring()

    def _file_ring(self) -> Ring:
        """The ring the cluster file gives: its nodes, each with the cluster's tokens per node."""
        return Ring.build(self.cluster.names, self.cluster.vnodes, self.cluster.zones)

    def _entry(self, name: str, what: str) -> NodeEntry:
        """The cluster file's entry of a node this directory started, to `what` it."""
        if name in self._learned:
            raise BadInput(
                f"cannot {what} {name}: it joined with a join token, so this cluster directory did not "
                f"start it and has no hold on its process; do it where {name} runs"
            )
        return self.cluster.node(name)

    def placement(self, name: str) -> NodePlacement:
        """Where node `name` runs: address, HTTP port, pid, log, wire protocol; for a member of no
        cluster file, what gossip says (`joined` is then "token")."""
        member = self._learned.get(name)
        if member is None:
            entry = self.cluster.node(name)
            return {
                "host": entry.host,
                "port": entry.port,
                "http_port": entry.http_port,
                "pid": entry.pid,
                "log": entry.log,
                "protocol": entry.protocol,
                "joined": "file",
            }
        host, _, port = member.address.rpartition(":")
        http = member.http.rpartition(":")[2]
        return {
            "host": host,
            "port": int(port),
            "http_port": int(http) if http.isdigit() else None,
            "pid": None,
            "log": None,
            "protocol": None,
            "joined": "token",
        }

    async def drain_notes(self) -> list[tuple[str, dict[str, Any], str]]:
        """Notes the running nodes made since the last call (node/note_log.py)."""
        return await self._notes.drain([n for n in self.names if self.is_alive(n)])

    async def _read_notes(self, name: str, since: int, boot: str) -> dict[str, Any] | None:
        with trio.move_on_after(2 * NOTES_TIMEOUT):
            try:
                args = NotesArgs(since=since, boot=boot)
                return await self.call(name, "notes", args, NOTES_TIMEOUT)  # type: ignore[no-any-return]
            except (RpcError, ClientError, OSError):
                pass  # down or an older node: its notices are missed, not its data
        return None

    # --- RPC -----------------------------------------------------------------------------------

    async def _conn(self, name: str) -> RpcClient:
        conn = self._conns.get(name)
        if conn is not None and not conn.closed:
            return conn
        async with self._locks[name]:
            conn = self._conns.get(name)
            if conn is None or conn.closed:
                where = self.placement(name)
                conn = RpcClient(where["host"], where["port"], name, access=client_access(self.cluster))
                await conn.connect()
                self._nursery.start_soon(conn.serve)
                self._conns[name] = conn
            return conn

    async def rpc(self, name: str, op: str, timeout: float = ADMIN_TIMEOUT, **args: Any) -> Any:
        """One call to node `name`; a refusal that says whose fault it is (a token without the
        role, a bad snapshot name) comes out as a ClientError with its code, not as an RpcError."""
        conn = await self._conn(name)
        try:
            return await conn.call(op, timeout, **args)
        except RpcError as exc:
            if exc.code:
                raise ClientError(exc.code, str(exc)) from None
            raise

    async def call(self, name: str, op: str, args: object, timeout: float = ADMIN_TIMEOUT) -> Any:
        """A call of NODE_CALLS to node `name`, its body written from `args`, of its entry's class."""
        return await self.rpc(name, op, timeout, **call_body(op, args))

    async def request(self, via: str, request: Any, timeout: float) -> Result:
        try:
            body = await self.rpc(via, "request", timeout, msg=to_wire(request))
            result = from_wire(body)
        except RpcError as exc:
            if exc.kind in ("unreachable", "lost", "draining"):
                # Route around it for a moment (a node restarted elsewhere may not listen yet).
                self._alive[via] = (trio.current_time(), False)
            return Failure(CLIENT_CODES[exc.kind], str(exc))
        except ValueError as exc:
            return Failure("internal", f"node {via} sent an answer this client cannot read: {exc}")
        return result  # type: ignore[no-any-return]

    async def _admin(self, name: str, op: str, args: object = NoArgs()) -> Any:
        """An admin view; None when the node is down or does not answer (views show it down)."""
        if not self.is_alive(name):
            return None
        try:
            return await self.call(name, op, args)
        except RpcError:
            return None

    async def node_info(self, name: str, counts: bool = True) -> NodeInfo:
        info = await self._admin(name, "info", InfoArgs(counts=counts))
        if info is None:  # down: and why, when its process said so as it stopped (a full disk)
            tokens = len(self.ring.tokens_by_node().get(name, []))
            down = admin_node_info(name, self.zones[name], None, 0.0, tokens)
            log = self.placement(name)["log"]
            return with_last_words(down, log) if log else down
        return info  # type: ignore[no-any-return]

    async def node_records(self, name: str, keyspace: str, key: str) -> tuple[Record | None, Record | None]:
        plain = await self._admin(name, "records", RecordsArgs(keyspace=keyspace, key=key))
        return (None, None) if plain is None else records_from_plain(plain)

    async def node_hints(self, name: str) -> list[HintQueueRow]:
        return await self._admin(name, "hints") or []

    async def node_metrics(self, name: str) -> NodeMetrics:
        plain = await self._admin(name, "metrics")
        return NodeMetrics() if plain is None else metrics_from_plain(plain)

    async def node_members(self, name: str, placement: bool = False) -> list[MemberRow]:
        return await self._admin(name, "members", MembersArgs(placement=placement)) or []

    async def node_tree(self, name: str, keyspace: str, lo: int, hi: int) -> list[list[Any]]:
        return await self._admin(name, "tree", TreeArgs(keyspace=keyspace, lo=lo, hi=hi)) or []

    # --- storage -------------------------------------------------------------------------------

    async def _timed(self, node: str, op: str, **args: Any) -> tuple[Any, float]:
        """A storage operation: as long as its data takes (a big compaction: minutes), a long timeout."""
        started = time.perf_counter()
        try:
            result = await self.rpc(node, op, STORAGE_TIMEOUT, **args)
        except RpcError as exc:
            raise Unavailable(f"{op} on {node}: {exc}") from exc
        return result, round((time.perf_counter() - started) * 1000, 3)

    async def run_on_node(self, operation: NodeOperation, name: str) -> dict[str, Any]:
        value, ms = await self._timed(name, operation.name)
        return {"node": name, operation.result: value, "ms": ms}

    def _snapshot_dir(self, snapshot: str) -> Path:
        return Path(self.cluster.dir) / "snapshots" / snapshot

    async def snapshot(self, snapshot: str, to: str | None = None) -> SnapshotDone:
        """Each live node links its tables under the cluster's snapshots/NAME, or copies them to
        TO/NAME (snapshots/NAME/LOCATION then says where); its WALs are archived there."""
        from bhandar_cli.store import LOCATION

        local = self._snapshot_dir(snapshot)
        target = Path(to).resolve() / snapshot if to else local
        if local.exists() or target.exists():
            raise BadInput(f"snapshot {snapshot} already exists")
        started = time.perf_counter()
        if to:
            local.mkdir(parents=True)
            (local / LOCATION).write_text(str(target))
        files = 0
        for name in self.names:
            if self.is_alive(name):
                args = SnapshotArgs(snapshot=snapshot, to=str(target.parent) if to else None)
                files += int((await self._timed(name, "snapshot", **call_body("snapshot", args)))[0])
        ms = round((time.perf_counter() - started) * 1000, 3)
        return {"name": snapshot, "files": files, "ms": ms, "to": str(target) if to else None}

    async def restore(self, snapshot: str, until: float | None = None) -> RestoreDone:
        """Verify the snapshot's files, stop each node, put the snapshot's tables and the archived
        writes up to `until` in its data directory, start it again."""
        from bhandar_cli.fleet import cluster_key
        from bhandar_cli.store import restore_node_dir, restore_summary, snapshot_home, verify_snapshot

        local = self._snapshot_dir(snapshot)
        if not local.is_dir():
            raise BadInput(f"no snapshot named {snapshot}")
        started = time.perf_counter()
        base = snapshot_home(local)
        entries = [e for e in self.cluster.nodes if (base / e.id).is_dir()]
        verified, key = verify_snapshot(base, [e.id for e in entries], until), cluster_key(self.cluster)
        for entry in entries:  # every node down first: no live node may stream newer data back
            await self.kill(entry.id)
        splits = {e.id: restore_node_dir(str(base / e.id), e.data_dir, e.id, until, key) for e in entries}
        self.cluster = await start_many(self.cluster, list(splits))
        self._mtime = self._file_mtime()
        for name in splits:
            self._forget(name)
        return {
            "name": snapshot,
            "nodes": list(splits),
            "ms": round((time.perf_counter() - started) * 1000, 3),
            "verified_files": verified,
            **restore_summary(base, splits, until),
        }

    # --- membership ----------------------------------------------------------------------------

    async def add_node(self, name: str, zone: str | None) -> str:
        """Start a new node process that joins the ring (fleet/resize.py); returns its zone."""
        self._reload_if_changed()
        self._adopt(await resize_add_node(self.cluster, name, zone))
        return self.cluster.node(name).zone

    async def retire(self, name: str) -> None:
        """Stop a node that has left the ring and strike it from the cluster file. One that joined
        with a join token is only forgotten: its process is not ours (it has left: it serves no
        range, and stops where it runs)."""
        self._forget(name)
        if self._learned.pop(name, None) is not None:
            self._adopt(self.cluster)
            return
        self._adopt(await retire_node(self.cluster, name))

    def _adopt(self, cluster: ClusterFile) -> None:
        """Take a cluster file with other members: names, zones, routing ring, connection locks
        (the nodes are asked who the members are again at the next view)."""
        self.cluster = cluster
        self._learned = {n: m for n, m in self._learned.items() if n not in cluster.names}
        self.names = [*cluster.names, *sorted(self._learned)]
        self.zones = {**{n: m.zone for n, m in self._learned.items()}, **cluster.zones}
        self.ring = self._file_ring()
        self._locks = {name: self._locks.get(name) or trio.Lock() for name in self.names}
        self._alive.clear()
        self._membership = None
        self._mtime = self._file_mtime()

    # --- faults --------------------------------------------------------------------------------

    async def kill(self, name: str) -> bool:
        """SIGKILL the node's process and return once it has exited: a process that is still
        exiting counts as running (fleet/pids.py), so a `kill` right after this one would signal
        it again and say "killed" twice. False if it was not running."""
        self._reload_if_changed()
        pid = self._entry(name, "kill").pid
        killed = kill_process(pid)
        self._forget(name)
        if killed and not await wait_exit(pid, STOP_TIMEOUT):
            raise Unavailable(
                f"{name} (pid {pid}) was sent SIGKILL but is still running after "
                f"{STOP_TIMEOUT:g} s: the machine may be overloaded; look at it with ps"
            )
        return killed

    async def stop_node(self, name: str) -> str:
        """Stop a node cleanly (it drains its client requests first: node/process.py) and wait
        until its process has exited; how it stopped (supervisor.stop). It is not routed to from
        the moment the stop is asked."""
        self._reload_if_changed()
        entry = self._entry(name, "stop")
        self._stopping.add(name)
        try:
            how = await stop(entry, reach=client_access(self.cluster))
        finally:
            self._stopping.discard(name)
            self._forget(name)
        return how

    def protocol_of(self, name: str) -> int:
        """The wire protocol the node is (re)started with (the cluster file's)."""
        self._reload_if_changed()
        return self._entry(name, "restart").protocol

    async def revive(self, name: str, protocol: int | None = None) -> bool:
        """Restart a stopped node with its data and ports (at `protocol` if given, recorded in the
        cluster file so later restarts keep it)."""
        self._reload_if_changed()
        self._entry(name, "restart")
        if protocol is not None:
            self.cluster = self.cluster.with_node(replace(self.cluster.node(name), protocol=protocol))
            save(self.cluster)
        self._starting.add(name)
        try:
            self.cluster, started = await start(self.cluster, name)
        finally:
            self._starting.discard(name)
            self._mtime = self._file_mtime()
            self._forget(name)
        return started

    def _forget(self, name: str) -> None:
        self._alive.pop(name, None)
        self._membership = None  # the nodes' view of it changes: ask them again
        conn = self._conns.pop(name, None)
        if conn is not None:
            conn._close("the node was restarted or killed")

    async def partition(self, groups: list[list[str]]) -> list[list[str]]:
        self._reload_if_changed()
        for name in (n for group in groups for n in group):
            self._entry(name, "partition")
        self.cluster, _ = await set_faults(self.cluster, partitions=groups)
        self._mtime = self._file_mtime()
        return self.partitions()

    async def heal(self) -> None:
        await self.partition([])

    async def delay(self, name: str, ms: float) -> None:
        self._reload_if_changed()
        self._entry(name, "delay")
        self.cluster, _ = await set_faults(self.cluster, delays={**self.cluster.delays, name: ms})
        self._mtime = self._file_mtime()

    def issuers(self) -> tuple[str, ...]:
        return tuple(n for n in self.cluster.issuing if n in self.names) if self.cluster.tls else ()

    async def remove_member(self, name: str) -> str:
        return (await self.on_issuer("remove", skip=name, **call_body("remove", RemoveArgs(node=name))))[0]

    async def on_issuer(self, op: str, skip: str = "", **args: Any) -> tuple[str, Any]:
        """One admin call that only an issuing node can carry out (it seals what it says with the
        CA key: token changes, removals): (the node that did, its answer). The issuers are asked
        first, then the others (a cluster without TLS has no issuers: any node does it); a node
        that refuses as no issuer, or does not answer, passes the call on."""
        issuers = list(self.issuers())
        problems = []
        for node in issuers + [n for n in self.names if n not in issuers]:
            if node == skip or not self.is_alive(node):
                continue
            try:
                return node, await self.rpc(node, op, **args)
            except RpcError as exc:
                problems.append(f"{node}: {exc}")
            except ClientError as exc:
                if exc.code != "refused":
                    raise
                problems.append(f"{node}: {exc}")
        raise Unavailable("no node could do it: " + ("; ".join(problems) or "none is running"))

    async def set_node_config(self, name: str, plain: dict[str, Any]) -> dict[str, Any]:
        """Apply a version of the cluster configuration on node `name` now (the `config` RPC)."""
        return await self.call(name, "config", ConfigArgs(config=plain))  # type: ignore[no-any-return]

    def save_config(self, plain: dict[str, Any]) -> None:
        """The cluster configuration, into the cluster file: restarted nodes start with it."""
        self._reload_if_changed()
        save(cluster := replace(self.cluster, config=plain))
        self.cluster, self._mtime = cluster, self._file_mtime()

    async def convergence_problems(self) -> list[str]:
        """Why the cluster is not yet converged: hints held for live nodes, replicas that differ."""
        live = [n for n in self.names if self.is_alive(n)]
        hints: dict[str, list[HintQueueRow]] = {}
        hashes: dict[str, list[list[Any]]] = {}  # per node: its range hashes
        replication: dict[str, int] = {}
        ranges = [list(r) for r in convergence_ranges(self.ring)]

        async def ask(name: str) -> None:
            hints[name] = await self.node_hints(name)
            hashes[name] = await self._admin(name, "range_hashes", RangeHashesArgs(ranges=ranges)) or []
            info = await self._admin(name, "info", InfoArgs(counts=False)) or {}  # counting keys: a scan
            replication.update({k["name"]: int(k["n"]) for k in info.get("keyspaces", [])})

        async with trio.open_nursery() as nursery:  # every node at once: `wait converged` polls this
            for name in live:
                nursery.start_soon(ask, name)
        hints = {name: hints[name] for name in live}  # the problems in node order, as answers came in any
        return admin_convergence_problems(self.ring, hints, hashes, replication, self.cluster.replicas)


@asynccontextmanager
async def open_tcp_backend(directory: str | Path) -> AsyncIterator[TcpBackend]:
    """A backend on the running cluster of `directory` (ClusterFileError if there is none), that
    knows the members as the nodes hold them from the start (a command may name one that joined
    by token)."""
    cluster = load_running(directory)
    error: list[Exception] = []
    async with trio.open_nursery() as nursery:
        try:
            backend = TcpBackend(cluster, nursery)
            await backend.membership()
            yield backend
        except Exception as exc:  # raised bare below, not wrapped in the nursery's group
            error.append(exc)
        finally:
            nursery.cancel_scope.cancel()
    if error:
        raise error[0]
