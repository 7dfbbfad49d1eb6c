"""`bhandar bench big`: small requests while values at the size limit are written, hinted, handed
off and repaired, beside the same small requests with no big value in flight, in the same run.

On a fresh process cluster started here (and stopped at the end) a stream of small QUORUM gets and
puts (100-byte values, a few paced workers) runs for the whole bench, each request's latency kept
under the phase it ran in:

- baseline: no big value anywhere (the figure the others are read against).
- write: values of core/model/limits.py MAX_VALUE_BYTES written at QUORUM (replicated to N nodes).
- hinted: one node stopped cleanly (its peers see it down at once), big values written (fallbacks
  keep them as hints), the node started again and its hints handed back to it, all of them.
- repaired: hinted handoff turned off on every node at runtime (the `config` operation), the
  node stopped again, big values written (the node misses them, no hint is kept), the node started
  and repaired by anti-entropy; hinted handoff back on.

The hinted and repaired phases write keys the stopped node is a replica of, so each value is one
it misses.

The report gives each phase's small-request count, errors, p50 and p99 (and p99 over the
baseline's), the big values written and their MB/s, and what the functional side saw: a big value
read back whole from every replica, hints handed off, every value the node missed held whole
by it after the repair (background anti-entropy may repair some before the explicit repair runs,
so `keys_repaired`, that call's count, is reported but not judged), and how often a live node was
seen down by a live peer (`false_downs`: a node stalled by a big value would be). The command
(cli/bench_big_cmd.py) parses and renders.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bhandar_cli.core.model import Versioned

if TYPE_CHECKING:
    from bhandar_cli.client import Client, TcpBackend

KEYSPACE = "bench_big"
SMALL = b'"' + b"s" * 98 + b'"'  # 100 bytes of JSON
SMALL_GAP = 0.01  # seconds each small worker waits between two requests (a steady, light load)
PHASES = ("baseline", "write", "hinted", "repaired")
SAMPLE_GAP = 0.2  # seconds between two looks at every node's view of its peers
SETTLE = 60.0  # seconds a node has to come back, its hints to drain, its missed values to arrive


class BigBench:
    def __init__(self, values: int, seconds: float, concurrency: int) -> None:
        self.values = values
        self.seconds = seconds
        self.concurrency = concurrency
        self.phase = "baseline"
        self.latencies: dict[str, list[float]] = {p: [] for p in PHASES}
        self.gets: dict[str, list[float]] = {p: [] for p in PHASES}  # reads only: no fsync waits
        self.errors: dict[str, int] = dict.fromkeys(PHASES, 0)
        self.first_error = ""
        self.false_downs: list[str] = []
        self.big_seconds: dict[str, float] = {}
        self.stopped: str | None = None  # the node down on purpose (its downs are no false ones)
        self.done = False

    async def run(self, workdir: Path, nodes: int) -> dict[str, Any]:
        import trio

        from bhandar_cli.client import open_tcp_client
        from bhandar_cli.fleet import down, load, up

        cluster = await up(workdir, nodes, min(3, nodes), 0, 8, 3)
        try:
            async with open_tcp_client(cluster.dir, "QUORUM") as client:
                await client.admin.keyspace_create(KEYSPACE)
                async with trio.open_nursery() as nursery:
                    for w in range(self.concurrency):
                        nursery.start_soon(self._small, client, w)
                    nursery.start_soon(self._watch, client)
                    try:
                        report = await self._phases(client)
                    finally:
                        self.done = True
        finally:
            # The file, not `cluster`: a node restarted during the run has a new pid there.
            await down(load(cluster.dir))
        return report

    async def _phases(self, client: Client[TcpBackend]) -> dict[str, Any]:
        import trio

        from bhandar_cli.core.model import MAX_VALUE_BYTES

        backend = client.backend
        victim = backend.names[-1]
        await trio.sleep(self.seconds)  # baseline
        self.phase = "write"
        await self._write_big(client, [f"w-{i}" for i in range(self.values)])
        copies = await self._replicated(client, "w-0")
        self.phase = "hinted"
        before = await self._hints_delivered(client)
        await self._stop(client, victim)
        await self._write_big(client, await self._keys_on(client, "h", victim))
        hinted = await self._hints_for(client, victim)
        await self._start(client, victim)
        with trio.move_on_after(SETTLE):
            while await self._hints_for(client, victim):
                await trio.sleep(0.1)
        handed_off = await self._hints_delivered(client) - before
        self.phase = "repaired"
        await self._configure(client, 1, {"hinted_handoff": False})
        await self._stop(client, victim)
        missed = await self._keys_on(client, "r", victim)
        await self._write_big(client, missed)
        await self._start(client, victim)
        # Background anti-entropy may get there before this call does (it then finds nothing to
        # repair, or leaves a range a background session is moving): what is judged is that the
        # node holds every value it missed, within SETTLE.
        repaired = (await client.admin.repair(victim))["keys"]
        whole = 0
        with trio.move_on_after(SETTLE):
            while (whole := await self._held_by(client, victim, missed)) < len(missed):
                await trio.sleep(0.1)
        await self._configure(client, 2, {})
        self.phase = "after"
        phases = {p: self._summary(p) for p in PHASES}
        base = phases["baseline"]["p99_ms"] or 0.0
        for p in PHASES:
            p99 = phases[p]["p99_ms"]
            phases[p]["p99_over_baseline"] = round(p99 / base, 2) if base and p99 else None
        mb = self.values * MAX_VALUE_BYTES / 1e6
        return {
            "cmd": "bench big",
            "ok": copies == min(3, len(backend.names))
            and handed_off >= 1
            and whole == len(missed) == self.values
            and not self.false_downs,
            "nodes": len(backend.names),
            "value_bytes": MAX_VALUE_BYTES,
            "big_values": 3 * self.values,
            "big_mb_per_s": {k: round(mb / s, 1) if s else None for k, s in self.big_seconds.items()},
            "replicas_holding_big_value": copies,
            "hints_held": hinted,
            "hints_handed_off": handed_off,
            "keys_repaired": repaired,
            "big_values_repaired": whole,
            "stopped_node": victim,
            "false_downs": self.false_downs[:20],
            "small": phases,
            "first_error": self.first_error,
        }

    async def _small(self, client: Client[TcpBackend], worker: int) -> None:
        """One small-request worker: a put or a get of its own keys, at QUORUM, paced."""
        import trio

        from bhandar_cli.core.model import BhandarError, ClientError

        rng, i = random.Random(worker), 0
        while not self.done:
            phase, key = self.phase, f"s{worker}-{rng.randrange(50)}"
            start = time.perf_counter()
            try:
                if i % 2:
                    await client.data.get(KEYSPACE, key)
                else:
                    await client.data.put(KEYSPACE, key, SMALL, "application/json", "auto")
            except (BhandarError, ClientError, OSError) as exc:
                if phase in self.errors and phase == self.phase:
                    self.errors[phase] += 1
                    self.first_error = self.first_error or f"{phase}: {exc}"
            else:
                if phase in self.latencies and phase == self.phase:  # not one that spans two phases
                    took = (time.perf_counter() - start) * 1000.0
                    self.latencies[phase].append(took)
                    if i % 2:
                        self.gets[phase].append(took)
            i += 1
            await trio.sleep(SMALL_GAP)

    async def _watch(self, client: Client[TcpBackend]) -> None:
        """Every SAMPLE_GAP: each live node's view of its live peers; a live one seen down is a
        false down (a node stalled by a big value, or its peer's links stuck behind one)."""
        import trio

        backend = client.backend
        while not self.done:
            live = [n for n in backend.names if backend.is_alive(n) and n != self.stopped]
            for observer in live:
                for row in await backend.node_members(observer):
                    seen = row["id"]
                    if seen in live and seen != observer and not row.get("up", True):
                        self.false_downs.append(f"{self.phase}: {observer} saw {seen} down")
            await trio.sleep(SAMPLE_GAP)

    async def _write_big(self, client: Client[TcpBackend], keys: list[str]) -> None:
        from bhandar_cli.core.model import MAX_VALUE_BYTES

        started = time.perf_counter()
        for i, key in enumerate(keys):
            value = bytes([65 + i % 26]) * MAX_VALUE_BYTES
            await client.data.put(KEYSPACE, key, value, "application/octet-stream", "none", "QUORUM")
        self.big_seconds[self.phase] = time.perf_counter() - started

    async def _keys_on(self, client: Client[TcpBackend], tag: str, node: str) -> list[str]:
        """`self.values` key names among whose replicas `node` is (so every value written to them
        while it is down is one it misses: a hint for it, or a key to repair)."""
        keys: list[str] = []
        for i in range(1000 * self.values):
            if len(keys) == self.values:
                break
            if node in (await client.views.prefs(KEYSPACE, f"{tag}-{i}"))["replicas"]:
                keys.append(f"{tag}-{i}")
        return keys

    async def _holds_whole(self, client: Client[TcpBackend], node: str, key: str) -> bool:
        from bhandar_cli.core.model import MAX_VALUE_BYTES

        record, _ = await client.backend.node_records(node, KEYSPACE, key)
        siblings = record.siblings if isinstance(record, Versioned) else ()
        return any(len(s.value or b"") == MAX_VALUE_BYTES for s in siblings)

    async def _held_by(self, client: Client[TcpBackend], node: str, keys: list[str]) -> int:
        """How many of `keys` `node` holds the whole big value of."""
        return sum([await self._holds_whole(client, node, key) for key in keys])

    async def _replicated(self, client: Client[TcpBackend], key: str) -> int:
        """How many nodes hold the whole big value of `key` (its replicas should: N of them)."""
        return sum([await self._holds_whole(client, name, key) for name in client.backend.names])

    async def _hints_for(self, client: Client[TcpBackend], node: str) -> int:
        backend, held = client.backend, 0
        for peer in [p for p in backend.names if p != node and backend.is_alive(p)]:
            held += sum(int(q["count"]) for q in await backend.node_hints(peer) if q["target"] == node)
        return held

    async def _hints_delivered(self, client: Client[TcpBackend]) -> int:
        total = 0
        for node in client.backend.names:
            total += int((await client.backend.node_metrics(node)).hints_delivered)
        return total

    async def _seen_up(self, client: Client[TcpBackend], node: str) -> list[bool]:
        """Whether each live peer of `node` sees it up."""
        backend, views = client.backend, []
        for peer in [p for p in backend.names if p != node and backend.is_alive(p)]:
            views += [bool(m["up"]) for m in await backend.node_members(peer) if m["id"] == node]
        return views

    async def _stop(self, client: Client[TcpBackend], node: str) -> None:
        """Stop `node` cleanly and wait (bounded) until every live peer sees it down."""
        import trio

        self.stopped = node
        await client.backend.stop_node(node)
        with trio.move_on_after(SETTLE):
            while any(await self._seen_up(client, node)):
                await trio.sleep(0.05)

    async def _start(self, client: Client[TcpBackend], node: str) -> None:
        """Start `node` again and wait (bounded) until every live peer sees it up."""
        import trio

        await client.backend.revive(node)
        with trio.move_on_after(SETTLE):
            while not all(await self._seen_up(client, node)) or not await self._sees_all_up(client, node):
                await trio.sleep(0.05)
        self.stopped = None  # seen up and seeing its peers up: the watch judges it again

    async def _sees_all_up(self, client: Client[TcpBackend], node: str) -> bool:
        """Whether `node` sees each of its live peers up (a node just started learns it by gossip)."""
        backend = client.backend
        live = {p for p in backend.names if p != node and backend.is_alive(p)}
        up = {row["id"] for row in await backend.node_members(node) if row.get("up", True)}
        return live <= up

    async def _configure(self, client: Client[TcpBackend], version: int, values: dict[str, Any]) -> None:
        for name in client.backend.names:
            await client.backend.set_node_config(name, {"version": version, "values": values})

    def _summary(self, phase: str) -> dict[str, Any]:
        lat, gets = sorted(self.latencies[phase]), sorted(self.gets[phase])

        def pct(p: float, of: list[float]) -> float | None:
            return round(of[min(len(of) - 1, int(p / 100.0 * len(of)))], 3) if of else None

        return {
            "count": len(lat) + self.errors[phase],
            "errors": self.errors[phase],
            "p50_ms": pct(50, lat),
            "p99_ms": pct(99, lat),
            "max_ms": round(lat[-1], 3) if lat else None,
            # Reads wait for no fsync: what they lose to big values is the network and event loops.
            "get_p99_ms": pct(99, gets),
        }
