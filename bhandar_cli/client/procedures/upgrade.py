"""The rolling upgrade (`upgrade [to=N]`, `bhandar cluster upgrade --to N`): one node at a time,
never two replicas of a key down together, and no request failed for its sake.

Each node in turn goes through these phases, reported live to `progress` as they start:

- check: every other node is up, in the client's eyes and in every live node's gossip view. A
  node that is down and shares a preference list with the one about to stop would leave two
  replicas of those keys down: the upgrade stops there and says so (`Refused`). One that runs
  but is not yet seen up by every peer (just started) is waited for, up to REJOIN_TIMEOUT.
- flush: the node writes its memtable to an SSTable (a shorter WAL replay on start).
- stop: a clean stop that drains (node/process.py `stop`): new client requests are refused as not
  run, and the client sends them to the key's next replica (client/data_client.py `call`); those in
  flight are answered; then the process exits. The client routes around the node meanwhile.
- down: every live peer sees it down (a version-2 node said goodbye, so its version-2 peers know
  at once; version-1 peers wait for their failure detector): what it misses is hinted from here.
- start: the node starts again, at protocol `to` when given (kept in the cluster file).
- rejoin: every live peer sees it up and (node processes) has its link to it open again.
- hints: no peer holds hints for it any more (what it missed while down was handed back).
- repair (with `repair=True`): it runs anti-entropy on its ranges. Off by default: read repair
  and the periodic anti-entropy bring back the few writes of the detection window, and a full
  repair per step loads a small machine enough to slow the requests it is meant to protect.
- serve: it answers requests: PROBES reads through it, whose p99 must be within P99_BOUND_MS,
  retried until SETTLE_TIMEOUT.
- settle: until twice the request timeout (a forward's deadline) has passed since every peer saw
  it up. A put forwarded to it while it was away (by a peer that had not yet seen it down) waits
  that long before its coordinator falls back to another replica; stopping the next node sooner
  could make that other replica the one being stopped (found by tests/e2e/test_upgrade.py: 2 of
  657 writes failed so, "forwarded to B, C, which did not answer in time").

Only then does the next node stop; a node that does not serve again within SETTLE_TIMEOUT stops
the upgrade (`Unavailable`, naming the phase it did not pass). A cluster whose nodes are not
processes (the in-process one: its `Capabilities`) is stopped and restarted in place, flushed when
its nodes have a storage engine; its nodes speak this process's wire protocol, so `to` needs a
process cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bhandar_cli.core.model import BadInput, BhandarError, Refused, Unavailable
from bhandar_cli.core.protocol import NODE_OPERATIONS, Failure, GetRequest, RepairRequest

if TYPE_CHECKING:
    from bhandar_cli.client.backend import Backend

DOWN_TIMEOUT = 10.0  # seconds to wait for every peer to see a stopped node down
REJOIN_TIMEOUT = 10.0  # seconds a running node has, before a step, to be seen up by every peer
SETTLE_TIMEOUT = 60.0  # seconds a restarted node has to rejoin, drain its hints and serve
PROBES = 20  # reads in one serving probe
P99_BOUND_MS = 500.0  # a probe's p99 must be within this for the node to count as serving
PROBE_KEYSPACE = "kv"
FORWARD_MARGIN = 0.5  # seconds beyond a forward's deadline before the next node stops
DEFAULT_REQUEST_TIMEOUT = 1.0

Progress = Callable[[dict[str, Any]], None]


def shares_replicas(backend: Backend, a: str, b: str, n: int) -> bool:
    """Whether some key has both `a` and `b` among its `n` replicas."""
    ring = backend.ring
    return any({a, b} <= set(ring.preference_list(r.hi, n)) for r in ring.ranges())


async def down_nodes(backend: Backend) -> dict[str, list[str]]:
    """Node -> who sees it down: the client (its process is not running) or live peers (gossip)."""
    seen: dict[str, list[str]] = {}
    live = [n for n in backend.names if backend.is_alive(n)]
    for name in backend.names:
        if name not in live:
            seen.setdefault(name, []).append("this client")
    for peer in live:
        for row in await backend.node_members(peer):
            if row.get("status") != "left" and not row.get("up", True) and row["id"] in backend.names:
                seen.setdefault(str(row["id"]), []).append(peer)
    return seen


async def check_step(backend: Backend, node: str, n: int) -> None:
    """Refuse to stop `node` if a node that shares keys with it is down.

    A node whose process runs but that some peer's gossip still calls down has just been started
    (`cluster start D` and then the upgrade, at once): its peers are given up to REJOIN_TIMEOUT to
    see it up before the step is refused. A node the client itself sees down is refused at once."""
    import trio

    blocking: dict[str, list[str]] = {}
    with trio.move_on_after(REJOIN_TIMEOUT):
        while True:
            blocking = {
                other: seers
                for other, seers in (await down_nodes(backend)).items()
                if other != node and shares_replicas(backend, node, other, n)
            }
            if not blocking:
                return
            if any("this client" in seers for seers in blocking.values()):
                break
            await trio.sleep(0.1)
    other, seers = next(iter(blocking.items()))
    who = ", ".join(seers)
    raise Refused(
        f"upgrade stopped before {node}: {other} is down (seen by {who}) and shares keys with "
        f"{node}; stopping {node} now would leave two replicas of those keys down. Bring "
        f"{other} back first (revive {other}, or bhandar cluster start {other}), then run the "
        "upgrade again"
    )


class RollingUpgrade:
    """One run of the upgrade over a backend; `run` returns the report."""

    def __init__(
        self, backend: Backend, to: int | None, progress: Progress | None = None, repair: bool = False
    ) -> None:
        self.backend = backend
        self.repair = repair
        self.to = to
        self.progress = progress or (lambda _event: None)
        self.replicas = backend.replicas
        self._node_started = 0.0
        self._last_phase = ""

    def _phase(self, node: str, phase: str, **extra: Any) -> None:
        self._last_phase = phase
        elapsed = round(self.backend.now() - self._node_started, 3)
        self.progress({"node": node, "phase": phase, "elapsed": elapsed, **extra})

    async def run(self) -> dict[str, Any]:
        backend = self.backend
        processes = backend.capabilities.node_processes
        from bhandar_cli.node.net import MIN_COMPATIBLE_VERSION, PROTOCOL_VERSION

        if self.to is not None and not MIN_COMPATIBLE_VERSION <= self.to <= PROTOCOL_VERSION:
            raise BadInput(f"to must be {MIN_COMPATIBLE_VERSION}..{PROTOCOL_VERSION} (got {self.to})")
        if self.to is not None and not processes:
            raise BadInput(
                "upgrade to=N changes the wire protocol of node processes: connect to a "
                "process cluster (bhandar repl --connect DIR, or bhandar cluster upgrade)"
            )
        started = self.backend.now()
        rows: list[dict[str, Any]] = []
        for name in list(backend.names):
            self._node_started = self.backend.now()
            before = backend.protocol_of(name)
            if self.to is not None and before == self.to and backend.is_alive(name):
                rows.append(
                    {
                        "node": name,
                        "seconds": 0.0,
                        "settled": True,
                        "skipped": True,
                        "protocol": before,
                        "from": before,
                    }
                )
                self._phase(name, "skipped", protocol=before)
                continue
            self._phase(name, "check")
            await check_step(backend, name, self.replicas)
            self._phase(name, "flush")
            if backend.capabilities.storage_engine:  # a cluster kept in memory has nothing to flush
                await backend.run_on_node(NODE_OPERATIONS["flush"], name)
            self._phase(name, "stop")
            how = await backend.stop_node(name)
            self._phase(name, "down", stopped=how)
            await self._seen_down(name)
            self._phase(name, "start")
            await backend.revive(name, protocol=self.to)
            row = await self._settle(name)
            row.update(node=name, stopped=how, seconds=round(self.backend.now() - self._node_started, 3))
            if processes:
                row.update({"from": before, "protocol": backend.protocol_of(name)})
            rows.append(row)
            if not row["settled"]:
                self._phase(name, "not settled", seconds=row["seconds"])
                done = ", ".join(r["node"] for r in rows[:-1] if not r.get("skipped")) or "none"
                raise Unavailable(
                    f"upgrade stopped after {name}: it was started again but did not pass "
                    f"'{self._last_phase}' within {SETTLE_TIMEOUT:g} s (nodes done before it: {done}); "
                    f"see its log, then run the upgrade again"
                )
            self._phase(name, "done", seconds=row["seconds"])
        return {
            "cmd": "upgrade",
            "ok": True,
            "to": self.to,
            "nodes": rows,
            "seconds": round(self.backend.now() - started, 3),
        }

    async def _settle(self, node: str) -> dict[str, Any]:
        """Wait (bounded) until `node` serves again; what was seen of it."""
        import trio

        row: dict[str, Any] = {"settled": False, "p99_ms": None, "repaired_keys": 0}
        with trio.move_on_after(SETTLE_TIMEOUT):
            self._phase(node, "rejoin")
            while not await self._seen_up(node):
                await trio.sleep(0.1)
            forwards_expire = self.backend.now() + FORWARD_MARGIN + 2 * await self._request_timeout(node)
            self._phase(node, "hints")
            while await self._hints_for(node):
                await trio.sleep(0.1)
            if self.repair:
                self._phase(node, "repair")
                row["repaired_keys"] = await self._repair(node)
            self._phase(node, "serve")
            while True:
                p99 = await self._probe(node)
                row["p99_ms"] = p99
                if p99 is not None and p99 <= P99_BOUND_MS:
                    break
                await trio.sleep(0.2)
            if self.backend.now() < forwards_expire:
                self._phase(node, "settle")
                await trio.sleep(forwards_expire - self.backend.now())
            row["settled"] = True
        return row

    async def _request_timeout(self, node: str) -> float:
        """The node's request timeout (its configuration; the default if it does not say)."""
        info = await self.backend.node_info(node, counts=False)
        value = info.get("config", {}).get("values", {}).get("request_timeout")
        return float(value) if isinstance(value, int | float) else DEFAULT_REQUEST_TIMEOUT

    async def _seen_up(self, node: str) -> bool:
        backend = self.backend
        if not backend.is_alive(node):
            return False
        peers = [p for p in backend.names if p != node and backend.is_alive(p)]
        for peer in peers:
            views = {m["id"]: m["up"] for m in await backend.node_members(peer)}
            if not views.get(node):
                return False
            # A node process also needs the peer's link to it open again: until then what the
            # peer sends it is dropped, though gossip (its own links) already shows it up.
            connected = (await backend.node_info(peer, counts=False)).get("connected")
            if connected is not None and node not in connected:
                return False
        return True

    async def _seen_down(self, node: str) -> bool:
        """Wait (bounded) until every live peer calls `node` down: from then on what it misses is
        hinted for it, and its next life is news to all. A version-2 node said goodbye, so its
        version-2 peers know at once; version-1 peers wait for their failure detector."""
        import trio

        backend = self.backend
        with trio.move_on_after(DOWN_TIMEOUT):
            while True:
                peers = [p for p in backend.names if p != node and backend.is_alive(p)]
                views = [{m["id"]: m["up"] for m in await backend.node_members(p)} for p in peers]
                if not any(v.get(node) for v in views):
                    return True
                await trio.sleep(0.05)
        return False

    async def _hints_for(self, node: str) -> int:
        backend = self.backend
        peers = [p for p in backend.names if p != node and backend.is_alive(p)]
        held = 0
        for peer in peers:
            held += sum(1 for q in await backend.node_hints(peer) if q["target"] == node)
        return held

    async def _repair(self, node: str) -> int:
        from bhandar_cli.core.protocol import RepairResult

        result = await self.backend.request(node, RepairRequest(self.backend.new_rid()), SETTLE_TIMEOUT)
        return result.keys if isinstance(result, RepairResult) else 0

    async def _probe(self, node: str) -> float | None:
        """p99 in ms of PROBES reads through `node`; None if one failed."""
        backend = self.backend
        took: list[float] = []
        for i in range(PROBES):
            t0 = backend.now()
            try:
                result = await backend.request(
                    node, GetRequest(backend.new_rid(), PROBE_KEYSPACE, f"upgrade-probe-{i}", "ONE"), 2.0
                )
            except BhandarError:
                return None
            if isinstance(result, Failure) and result.code in ("unavailable", "timeout", "internal"):
                return None  # another refusal (no such keyspace) is still an answer
            took.append((backend.now() - t0) * 1000.0)
        took.sort()
        return round(took[min(len(took) - 1, int(0.99 * len(took)))], 3)
