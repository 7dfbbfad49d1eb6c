"""Read-only cluster views of the client: status, ring, prefs, clock, hints, metrics, hot keys,
keyspaces.

Each returns a dictionary in the JSON shape the man page lists under JSON OUTPUT (extra fields
allowed), declared here as a TypedDict (`StatusView`, `RingOwnershipView`, ...) so every reader is checked;
the REPL renders them with rich, `-o json` prints them as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from bhandar_cli.client.cluster_health import HealthView, NodeFacts, member_status, summarise
from bhandar_cli.client.membership import MembershipView
from bhandar_cli.client.outcomes import counter_parts, sibling_views
from bhandar_cli.core import HintQueueRow, NodeInfo
from bhandar_cli.core.membership import CODES, key_token
from bhandar_cli.core.model import BadInput, Versioned, context_of, relation
from bhandar_cli.core.roles import SHOWN, HotSketches

if TYPE_CHECKING:
    from bhandar_cli.client.backend import Backend

# The latency histogram's upper edges in metrics (ms); each is moved to the nearest exact edge.
HISTOGRAM_EDGES_MS = (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


class StatusNode(NodeFacts):
    """A node in `status`: what it says of itself, where it is on the ring, and its state in the
    vocabulary of cluster_health (`state`, `seen_down_by`, `group`, set once the summary is made)."""

    zone: str
    code: str  # U or D, then its membership status's letter
    tokens: int
    owns: float  # its share of the ring
    keys: int
    hints: int
    streams: Mapping[str, object]  # core/roles/streaming.py `StreamsView`; {} when down
    storage: dict[str, int]
    siblings_over_limit: dict[str, Any]
    protocol: int | None  # node processes only: the wire protocol
    config: int | None  # the cluster configuration version it runs, when up
    crashed: NotRequired[str]  # why it is down: a bug, not a kill
    conditions: NotRequired[list[str]]  # what is wrong while it is up
    state: NotRequired[str]
    seen_down_by: NotRequired[list[str]]
    group: NotRequired[int | None]
    # `cluster status` adds where each node runs (client/backends/tcp_backend.py `NodePlacement`)
    host: NotRequired[str]
    port: NotRequired[int]
    http_port: NotRequired[int | None]
    log: NotRequired[str | None]
    joined: NotRequired[str]
    pid: NotRequired[int | None]


class StatusView(TypedDict):
    cmd: Literal["status"]
    ok: bool
    nodes: list[StatusNode]
    partitions: list[list[str]]
    summary: HealthView
    membership: MembershipView
    dir: NotRequired[str]  # `cluster status`: the cluster directory
    delays: NotRequired[dict[str, float]]  # `cluster status`: the delays set on each node (ms)


class RangeShare(TypedDict):
    range: list[int]  # [lo, hi]
    owner: str
    share: float


class RingOwnershipView(TypedDict):
    cmd: Literal["ring"]
    ok: bool
    ownership: dict[str, float]
    ranges: list[RangeShare]
    zones: dict[str, str]


class PrefsView(TypedDict):
    cmd: Literal["prefs"]
    ok: bool
    keyspace: str
    key: str
    token: int
    owner: str
    replicas: list[str]
    zones: dict[str, str]
    fallbacks: list[str]
    up: dict[str, bool]


class ClockRelation(TypedDict):
    a: str
    b: str
    relation: str


class ClockView(TypedDict):
    cmd: Literal["clock"]
    ok: bool
    keyspace: str
    key: str
    replicas: dict[str, list[dict[str, Any]]]  # each replica's versions ([] when down)
    holders: dict[str, str]  # replica | hint
    down: list[str]
    relations: list[ClockRelation]


class HintsView(TypedDict):
    cmd: Literal["hints"]
    ok: bool
    queues: list[HintQueueRow]
    pending: int


class KeyspacesView(TypedDict):
    cmd: Literal["keyspace"]
    ok: bool
    keyspaces: list[dict[str, Any]]  # each definition's fields (core/model/config.py)


class ClusterViews:
    """The views, over one backend."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    async def any_info(self) -> NodeInfo:
        """What the first live node says of itself ({} when every node is down)."""
        for name in self.backend.names:
            if self.backend.is_alive(name):
                return await self.backend.node_info(name, counts=False)
        return {}

    async def status(self) -> StatusView:
        """Every member as the nodes hold the membership (client/membership.py), each with what it
        says of itself; the summary in the words of cluster_health."""
        membership = await self.backend.membership()
        ring = self.backend.ring
        tokens = ring.tokens_by_node()
        nodes: list[StatusNode] = []
        for name in self.backend.names:
            info = await self.backend.node_info(name)
            up = self.backend.is_alive(name)
            status = member_status(name, up, info, membership)
            nodes.append(
                {
                    "id": name,
                    "zone": self.backend.zones[name],
                    "up": up,
                    "status": status,
                    "code": ("U" if up else "D") + CODES.get(status, "?"),
                    "tokens": len(tokens.get(name, [])),
                    "owns": round(ring.ownership.get(name, 0.0), 4),
                    "keys": info.get("keys", 0),
                    "hints": info.get("hints", 0),
                    "sees_down": sorted(p for p, ok in info.get("peers", {}).items() if not ok),
                    "streams": info.get("streams", {}),
                    "storage": info.get("storage", {}),
                    "siblings_over_limit": info.get("siblings_over_limit", {}),
                    "protocol": info.get("protocol"),  # node processes only: the wire protocol
                    # the cluster configuration version it runs (client/procedures/config_rollout.py), when up
                    "config": (info.get("config") or {}).get("version") if up else None,
                }
            )
            if info.get("crashed"):
                nodes[-1]["crashed"] = info["crashed"]  # why it is down: a bug, not a kill
            if info.get("conditions"):
                nodes[-1]["conditions"] = info["conditions"]  # what is wrong while it is up
        partitions = self.backend.partitions()
        # each node's state in the one vocabulary
        health = summarise(nodes, partitions, membership.disagreements())
        for node, said in zip(nodes, health.nodes, strict=True):
            node.update({"state": said.state, "seen_down_by": list(said.seen_down_by), "group": said.group})
        return {
            "cmd": "status",
            "ok": True,
            "nodes": nodes,
            "partitions": partitions,
            "summary": health.to_json(),
            "membership": membership.to_json(),  # whose tables it is from, what they disagree on
        }

    async def ring(self) -> RingOwnershipView:
        await self.backend.membership()  # the ring the nodes route by
        ring = self.backend.ring
        ranges: list[RangeShare] = [
            {"range": [r.lo, r.hi], "owner": r.owner, "share": round(r.size / 2**32, 5)}
            for r in ring.ranges()
        ]
        return {
            "cmd": "ring",
            "ok": True,
            "ownership": {n: round(v, 4) for n, v in ring.ownership.items()},
            "ranges": ranges,
            "zones": dict(self.backend.zones),
        }

    async def prefs(self, keyspace: str, key: str, n: int | None = None) -> PrefsView:
        await self.backend.membership()  # the ring the nodes route by
        ring = self.backend.ring
        token = key_token(keyspace, key)
        n = n or await self.replication(keyspace)
        replicas = list(ring.preference_list(token, n))
        fallbacks = list(ring.fallbacks(token, n))
        zones = {x: self.backend.zones[x] for x in replicas + fallbacks}
        up = {x: self.backend.is_alive(x) for x in replicas + fallbacks}
        return {
            "cmd": "prefs",
            "ok": True,
            "keyspace": keyspace,
            "key": key,
            "token": token,
            "owner": ring.owner(token),
            "replicas": replicas,
            "zones": zones,
            "fallbacks": fallbacks,
            "up": up,
        }

    async def replication(self, keyspace: str) -> int:
        """Keyspace `keyspace`'s replication factor N, as a live node knows it (3 if none answers)."""
        info = await self.any_info()
        known = {ks["name"]: int(ks["n"]) for ks in info.get("keyspaces", [])}
        if keyspace in known:
            return known[keyspace]
        if known:  # a node answered and does not know it: the user's mistake, said as for a get
            from bhandar_cli.core.model import unknown_keyspace  # not on a one-shot get's path

            raise unknown_keyspace(keyspace, known)
        return 3  # nobody answered: the preference list of the default N still teaches

    async def keyspace_list(self) -> KeyspacesView:
        info = await self.any_info()
        spaces = sorted(info.get("keyspaces", []), key=lambda k: k["name"])
        return {"cmd": "keyspace", "ok": True, "keyspaces": spaces}

    async def clock(self, keyspace: str, key: str) -> ClockView:
        prefs = await self.prefs(keyspace, key)
        replicas: dict[str, list[dict[str, Any]]] = {}
        holders: dict[str, str] = {}
        down: list[str] = []
        clocks: dict[str, dict[str, int]] = {}
        for name in prefs["replicas"] + prefs["fallbacks"]:
            if not self.backend.is_alive(name):
                if name in prefs["replicas"]:
                    replicas[name] = []  # down: cannot be asked (listed in "down")
                    down.append(name)
                continue
            own, hinted = await self.backend.node_records(name, keyspace, key)
            record = own if name in prefs["replicas"] else hinted
            if record is None and name not in prefs["replicas"]:
                continue
            holders[name] = "replica" if name in prefs["replicas"] else "hint"
            versions = [v.to_json() for v in sibling_views(record)]
            if record is not None and not isinstance(record, Versioned):
                value, entries = counter_parts(record)
                versions = [
                    {"counter": value, "entries": {a: {"p": p, "n": q} for a, (p, q) in entries.items()}}
                ]
            replicas[name] = versions
            if isinstance(record, Versioned):
                clocks[name] = context_of(record.siblings)
        names = sorted(clocks)
        relations: list[ClockRelation] = [
            {"a": a, "b": b, "relation": relation(clocks[a], clocks[b])}
            for i, a in enumerate(names)
            for b in names[i + 1 :]
        ]
        return {
            "cmd": "clock",
            "ok": True,
            "keyspace": keyspace,
            "key": key,
            "replicas": replicas,
            "holders": holders,
            "down": down,
            "relations": relations,
        }

    async def hints(self) -> HintsView:
        queues: list[HintQueueRow] = []
        for name in self.backend.names:
            if self.backend.is_alive(name):
                queues.extend(await self.backend.node_hints(name))
        return {"cmd": "hints", "ok": True, "queues": queues, "pending": sum(q["count"] for q in queues)}

    async def metrics(self) -> dict[str, Any]:
        from bhandar_cli.core import oldest_hint_age
        from bhandar_cli.core.model import (
            HINTS_OLDEST,
            HINTS_PENDING,
            NODE_REQUESTS,
            REPAIR_AGE_VIEW,
            STORAGE,
            NodeMetrics,
            bucket_edge,
            place,
        )

        edges = [bucket_edge(ms) for ms in HISTOGRAM_EDGES_MS]

        total = NodeMetrics()
        per_node: dict[str, int] = {}
        storage: dict[str, Any] = {}
        repair: dict[str, Any] = {}
        ranges: set[str] = set()  # each keyspace's token ranges, whichever replicas hold them
        sketches = HotSketches()
        for name in self.backend.names:
            if self.backend.is_alive(name):
                m = await self.backend.node_metrics(name)
                total.merge(m)
                per_node[name] = m.requests
                info = await self.backend.node_info(name, counts=False)
                sketches.add(name, info)
                if info.get("storage"):
                    storage[name] = info["storage"]
                if info.get("repair"):
                    repair[name] = {k: v for k, v in info["repair"].items() if k != "ages"}
                    ranges.update(info["repair"].get("ages", {}))
        ops: dict[str, dict[str, Any]] = {}
        for (op, level), stats in sorted(total.ops.items()):
            ops.setdefault(op, {})[level] = {
                "count": stats.count,
                "ok": stats.ok,
                "success": round(stats.ok / stats.count, 4) if stats.count else 1.0,
                "p50_ms": round(stats.latency.percentile(50), 3),
                "p99_ms": round(stats.latency.percentile(99), 3),
                "max_ms": round(stats.latency.max_ms, 3),
                "outcomes": stats.outcomes(),  # "ok" and each error code, the client's own included
                # Successful requests at or below each edge (cumulative, as Prometheus counts).
                "histogram": {
                    "le_ms": [round(e, 3) for e in edges],
                    "counts": stats.latency.cumulative(edges),
                },
            }
        hints = await self.hints()
        # The counters where the metrics table puts them; then the figures of the nodes' info.
        view: dict[str, Any] = {"cmd": "metrics", "ok": True, "ops": ops, **total.view()}
        place(view, HINTS_PENDING.view, hints["pending"])
        place(view, HINTS_OLDEST.view, oldest_hint_age(hints["queues"]))
        place(view, NODE_REQUESTS.view, per_node)
        place(view, REPAIR_AGE_VIEW, repair)  # per node: ranges, never repaired, oldest age in seconds
        # distinct (keyspace, token range) pairs; repair_age counts each once per replica holding it
        place(view, ("anti_entropy", "ranges"), len(ranges))
        view["hot"] = sketches.view(self.backend.ring, 3)["keys"]  # the `hot` view's top 3 keys
        place(view, (STORAGE,), storage)
        return view

    async def hot(self, n: int = 10) -> dict[str, Any]:
        """The `n` keys clients ask for most, cluster-wide, from every live node's sketch: each
        with its rate, its share of all requests, its replicas and where its requests entered;
        and the share of all requests each node serves as a replica of the keys listed."""
        if not 1 <= n <= HOT_MAX:
            raise BadInput(f"hot shows 1 to {HOT_MAX} keys, not {n}")
        sketches = HotSketches()
        for name in self.backend.names:
            if self.backend.is_alive(name):
                sketches.add(name, await self.backend.node_info(name, counts=False))
        return sketches.view(self.backend.ring, n)


HOT_MAX = SHOWN  # keys `hot` shows at most (node info carries this many of each node's sketch)
