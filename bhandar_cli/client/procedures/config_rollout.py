"""The staged configuration change (`config set KEY VALUE`, `bhandar config set`): a new version of
the cluster configuration goes to one node at a time, each watched before the next, so one bad
value never reaches every node at once (the correlated failure a cluster-wide push makes).

The change is validated first (core/model/live_config.py: an unknown key or a bad value is one clear
error, and nothing has changed). Then each node in turn goes through these phases, reported live
to `progress` as they start:

- check: the node is up (a down node could not take the change, and would come back without it).
- baseline: its health over WINDOW seconds, on the version it runs: QUORUM reads through it
  (errors and p99) and its peers (does it see every live peer up, does every
  live peer see it up).
- apply: it takes the new version at runtime (the `config` RPC of a node process; in process, the
  backend), nothing restarts.
- watch: the same health over WINDOW seconds on the new version.
- done, or rollback: a regression (more failed probes than ERROR_SLACK over the baseline, a p99
  past max(P99_FLOOR_MS, P99_FACTOR x the baseline's), or a peer seen down that was up) puts the
  node back on its previous version and watches it once more (recovered: its errors stopped);
  the nodes before it, which took the change, go back too (last first), and the rollout stops
  with `Unavailable`, naming the node, the value and what regressed. The nodes after it never saw
  the change. A node that cannot take it (unreachable) stops the rollout the same way.

When every node runs the new version, a process cluster records it in its cluster file, so a node
restarted later comes back with it (`node run --config`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bhandar_cli.core.model import BhandarError, LiveConfig, Unavailable
from bhandar_cli.core.protocol import Failure, GetRequest

if TYPE_CHECKING:
    from bhandar_cli.client.backend import Backend

WINDOW = 2.0  # seconds of health measured before and after a node takes the change
PROBE_GAP = 0.05  # seconds between two probes of a window
PROBE_TIMEOUT = 2.0  # seconds a probe may take (a client's patience, not the node's setting)
ERROR_SLACK = 0.05  # failed probes allowed over the baseline's, as a share of the window's probes
P99_FLOOR_MS = 250.0
P99_FACTOR = 3.0
PROBE_KEYSPACE = "kv"

Progress = Callable[[dict[str, Any]], None]


async def node_config(backend: Backend, name: str) -> dict[str, Any]:
    """{"version", "values", "set"} of a live node (its `info`)."""
    info = await backend.node_info(name, counts=False)
    return dict(info.get("config") or {})


async def cluster_config(backend: Backend) -> dict[str, Any]:
    """`config show`: each node's version and values, and whether they all agree."""
    rows: list[dict[str, Any]] = []
    for name in backend.names:
        if not backend.is_alive(name):
            rows.append({"node": name, "up": False, "version": None, "values": {}})
            continue
        seen = await node_config(backend, name)
        rows.append(
            {
                "node": name,
                "up": True,
                "version": seen.get("version"),
                "values": seen.get("values", {}),
                "set": seen.get("set", {}),
            }
        )
    versions = {r["version"] for r in rows if r["up"]}
    newest = max((r for r in rows if r["up"]), key=lambda r: r["version"] or 0, default=None)
    return {
        "cmd": "config show",
        "ok": True,
        "version": newest["version"] if newest else None,
        "set": newest.get("set", {}) if newest else {},
        "values": newest["values"] if newest else {},
        "agreed": len(versions) == 1,
        "nodes": rows,
    }


class ConfigRollout:
    """One staged change over a backend; `run` returns the report or raises saying why it stopped."""

    def __init__(
        self, backend: Backend, key: str, value: str, progress: Progress | None = None, window: float = WINDOW
    ) -> None:
        self.backend = backend
        self.key = key
        self.value = value
        self.window = window
        self.progress = progress or (lambda _event: None)
        self._node_started = 0.0
        self._probe = 0

    def _phase(self, node: str, phase: str, **extra: Any) -> None:
        elapsed = round(self.backend.now() - self._node_started, 3)
        self.progress({"what": "config", "node": node, "phase": phase, "elapsed": elapsed, **extra})

    async def run(self) -> dict[str, Any]:
        backend = self.backend
        down = [n for n in backend.names if not backend.is_alive(n)]
        if down:
            raise Unavailable(
                f"config set needs every node up ({', '.join(down)} down): a down node would not take "
                "the change; bring it back first (revive, or bhandar cluster start)"
            )
        previous = {n: LiveConfig.from_plain(_set_of(await node_config(backend, n))) for n in backend.names}
        base = max(previous.values(), key=lambda c: c.version)
        new = base.changed(self.key, self.value)  # BadInput here: nothing has changed yet
        new = LiveConfig(max(c.version for c in previous.values()) + 1, new.values)
        started = backend.now()
        rows: list[dict[str, Any]] = []
        for name in list(backend.names):
            self._node_started = backend.now()
            self._phase(name, "check")
            if not backend.is_alive(name):
                raise Unavailable(f"config rollout stopped before {name}: it is down")
            self._phase(name, "baseline")
            before = await self.health(name)
            self._phase(name, "apply", version=new.version)
            try:
                await _apply(backend, name, new)
            except Exception as exc:  # unreachable, refused: the nodes before it go back too
                await self._undo(rows, previous)
                raise Unavailable(
                    f"config rollout of {self.key}={self.value} stopped at {name}, which did not take it "
                    f"({exc}); {_undone(rows)}"
                ) from exc
            self._phase(name, "watch")
            after = await self.health(name)
            row: dict[str, Any] = {"node": name, "before": before, "after": after}
            regressed = regression(before, after)
            if regressed:
                self._phase(name, "rollback", version=previous[name].version, regressed=regressed)
                await _apply(backend, name, previous[name])
                self._phase(name, "recover")
                row["recovered"] = recovered = await self.health(name)
                self._phase(name, "recovered", errors=recovered["errors"], p99_ms=recovered["p99_ms"])
                await self._undo(rows, previous)
                raise Unavailable(
                    f"config rollout of {self.key}={self.value} stopped at {name} and rolled it back to "
                    f"version {previous[name].version}: {regressed}; {_undone(rows)}"
                )
            row["seconds"] = round(backend.now() - self._node_started, 3)
            rows.append(row)
            self._phase(name, "done", seconds=row["seconds"])
        backend.save_config(new.to_plain())
        return {
            "cmd": "config set",
            "ok": True,
            "key": self.key.strip().lower(),
            "value": new.get(self.key.strip().lower()),
            "version": new.version,
            "from": base.version,
            "nodes": rows,
            "seconds": round(backend.now() - started, 3),
        }

    async def _undo(self, rows: list[dict[str, Any]], previous: dict[str, LiveConfig]) -> None:
        """Put the nodes that took the change (and were healthy with it) back on their previous
        version, last first: a value one node could not take is not left on the others."""
        for row in reversed(rows):
            node = row["node"]
            self._node_started = self.backend.now()
            self._phase(node, "rollback", version=previous[node].version)
            await _apply(self.backend, node, previous[node])
            row["rolled_back"] = True

    async def health(self, node: str) -> dict[str, Any]:
        """Over one window: probes through `node` (count, errors, p99 ms) and the peer pairs seen
        down at any sample (`node` not seeing a live peer, or a live peer not seeing `node`)."""
        import trio

        backend = self.backend
        took: list[float] = []
        errors: list[str] = []
        down: set[str] = set()
        deadline = backend.now() + self.window
        while backend.now() < deadline:
            error, ms = await self._one_probe(node)
            if error:
                errors.append(error)
            else:
                took.append(ms)
            if (len(took) + len(errors)) % 5 == 1:  # peers every fifth probe: views are not free
                down |= await self._peers_down(node)
            await trio.sleep(PROBE_GAP)
        down |= await self._peers_down(node)
        took.sort()
        p99 = round(took[min(len(took) - 1, int(0.99 * len(took)))], 3) if took else None
        return {
            "probes": len(took) + len(errors),
            "errors": len(errors),
            "p99_ms": p99,
            "peers_down": sorted(down),
            "first_error": errors[0] if errors else None,
        }

    async def _one_probe(self, node: str) -> tuple[str, float]:
        """A QUORUM read of a probe key through `node` (it waits for a peer's reply, so it fails
        when the node cannot reach its peers in time): (why it failed or "", ms). A read writes
        nothing: probing leaves no data behind."""
        backend = self.backend
        self._probe += 1
        request = GetRequest(backend.new_rid(), PROBE_KEYSPACE, f"config-probe-{self._probe % 64}", "QUORUM")
        t0 = backend.now()
        try:
            result = await backend.request(node, request, PROBE_TIMEOUT)
        except BhandarError as exc:
            return str(exc), 0.0
        if isinstance(result, Failure) and result.code in ("unavailable", "timeout", "internal"):
            return f"{result.code}: {result.error}", 0.0  # another refusal is still an answer
        return "", (backend.now() - t0) * 1000.0

    async def _peers_down(self, node: str) -> set[str]:
        backend = self.backend
        live = [p for p in backend.names if backend.is_alive(p)]
        down = set()
        for observer in live:
            for row in await backend.node_members(observer):
                seen = row["id"]
                if row.get("status") == "left" or seen not in live or seen == observer:
                    continue
                if not row.get("up", True) and node in (observer, seen):
                    down.add(f"{observer} sees {seen} down")
        return down


def regression(before: dict[str, Any], after: dict[str, Any]) -> str:
    """What got worse from `before` to `after` ("" if nothing did)."""
    problems = []
    allowed = before["errors"] + ERROR_SLACK * max(after["probes"], 1)
    if after["errors"] > allowed:
        problems.append(
            f"{after['errors']} of {after['probes']} probes failed (before: {before['errors']}), "
            f"e.g. {after['first_error']}"
        )
    if after["p99_ms"] is not None and before["p99_ms"] is not None:
        bound = max(P99_FLOOR_MS, P99_FACTOR * before["p99_ms"])
        if after["p99_ms"] > bound:
            problems.append(f"p99 {after['p99_ms']:.0f} ms (before: {before['p99_ms']:.0f} ms)")
    new_down = sorted(set(after["peers_down"]) - set(before["peers_down"]))
    if new_down:
        problems.append("peers flapped: " + ", ".join(new_down))
    return "; ".join(problems)


def _undone(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no other node had taken it"
    return f"the nodes that had taken it went back too: {', '.join(r['node'] for r in rows)}"


def _set_of(seen: dict[str, Any]) -> dict[str, Any]:
    return {"version": int(seen.get("version") or 0), "values": dict(seen.get("set") or {})}


async def _apply(backend: Backend, name: str, live: LiveConfig) -> dict[str, Any]:
    return await backend.set_node_config(name, live.to_plain())
