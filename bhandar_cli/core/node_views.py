"""Read-only views of one node's state for tools (status, members, hints, records, digests, trees,
range hashes), as plain data: the in-process client renders them directly, a node process serves
them over RPC. The shapes of those that travel as maps are declared here, once (`NodeInfo`,
`HintQueueRow`; a member row is core/membership/member_row.py's `MemberRow`), so every reader is
checked against the one writer."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import asdict
from typing import Any, TypedDict

from bhandar_cli.core.membership import MemberRow, MemberState, RingView
from bhandar_cli.core.model import Keyspaces, Record, SiblingLimit, Store, digest
from bhandar_cli.core.repair import AntiEntropy, HashIndex, as_hash
from bhandar_cli.core.roles import HintQueue, Streaming, StreamsView


class HintQueueRow(TypedDict):
    """The hints one node (`holder`) keeps for one down replica (`target`)."""

    holder: str
    target: str
    count: int
    oldest_s: float  # how long the oldest of them has waited


class RepairSummary(TypedDict):
    """Per-range anti-entropy ages of one node, summed up."""

    ranges: int
    never: int  # ranges never repaired since the node started
    oldest_s: float | None
    ages: dict[str, float | None]  # each range's age in seconds (None: never repaired)


class NodeInfo(TypedDict, total=False):
    """What a node says of itself (the `info` view; on the wire and in `-o json` as it is).

    `id`, `zone`, `up`, `status` and `tokens` are always there (node/admin.py `node_info`: what the
    driver knows, for a node that is down too); the core's part while it runs (`NodeViews.info`,
    core/node.py); `crashed` for a node that stopped on a bug; the rest only from a node process
    (node/process.py), which also says its connections, protocols and network faults."""

    # always
    id: str
    zone: str
    up: bool
    status: str  # normal | joining | leaving | left
    tokens: int
    # the core's, while it runs
    hints: int
    hints_oldest_s: float
    peers: dict[str, bool]  # each peer, and whether this node believes it up
    keyspaces: list[dict[str, Any]]  # each keyspace definition's fields (core/model/config.py)
    streams: StreamsView
    repair: RepairSummary
    storage: dict[str, int]  # the store's disk figures ({} in memory)
    siblings_over_limit: dict[str, Any]  # core/model/sibling_limit.py `view`
    unrepaired: list[str]
    conditions: list[str]  # what is wrong with it while it runs, in sentences
    keys: int  # only when counted (a scan of the store)
    gossip_refused: dict[str, int]
    removed: list[str]
    hot: dict[str, object]  # core/roles/hot_keys.py `view`
    config: dict[str, Any]  # core/model/live_config.py `config_view`
    # a node that stopped on a bug: why
    crashed: str
    # a node process's
    members: list[str]
    pid: int
    protocol: int
    peer_protocols: dict[str, int]
    reads_protocols: list[int]
    by_protocol: dict[str, dict[str, dict[str, int]]]
    draining: bool
    serving: bool
    host: str
    port: int
    http_port: int
    partitions: list[list[str]]
    delays: dict[str, float]  # ms
    transport: dict[str, int]
    peer_rejections: dict[str, int]
    connected: list[str]
    connections: dict[str, int]


class NodeViews:
    """Pure reads of a node's roles and store; nothing here changes the node."""

    def __init__(
        self,
        node_id: str,
        store: Store,
        hash_index: HashIndex,
        ring_view: RingView,
        keyspaces: Keyspaces,
        hints: HintQueue,
        anti_entropy: AntiEntropy,
        streaming: Streaming,
        sibling_limit: SiblingLimit,
        conditions: Collection[str] = (),
    ) -> None:
        self.node_id = node_id
        self.store = store
        self.hash_index = hash_index
        self.ring_view = ring_view
        self.keyspaces = keyspaces
        self.hints = hints
        self.anti_entropy = anti_entropy
        self.streaming = streaming
        self.sibling_limit = sibling_limit
        self.conditions = conditions  # what is wrong with the node now (storage corruption)

    def info(self, now: float, counts: bool = True) -> NodeInfo:
        """The node's status. `counts=False` skips the key count, a scan of the whole store: views
        that only want keyspaces, liveness or disk figures (the REPL's toolbar, several times a
        second). `status` and `tokens` only when the node gossips (its driver knows them otherwise)."""
        view = self.ring_view
        info: NodeInfo = {
            "hints": self.hints.pending(),
            "hints_oldest_s": oldest_hint_age(self.hints_summary(now)),
            "peers": {p: view.is_up(p, now) for p in view.peers()},
            "keyspaces": [asdict(ks) for ks in self.keyspaces.all()],
            "streams": self.streaming.view(),
            "repair": _repair_summary(self.anti_entropy.repair_ages(now)),
            "storage": self.storage(),
            "siblings_over_limit": self.sibling_limit.view(),
        }
        conditions = list(self.conditions)
        if unrepaired := sorted(self.anti_entropy.unrepaired.keyspaces):
            info["unrepaired"] = unrepaired
            conditions.append(
                f"answers no read of keyspace {', '.join(unrepaired)} until it is repaired from the "
                "other replicas (storage damage cost it records)"
            )
        if conditions:
            info["conditions"] = conditions
        if counts:
            info["keys"] = self.store.count()
        if view.gossiping:
            info["status"] = view.status
            info["tokens"] = len(view.mine.tokens)
        if view.gossip is not None:
            # Facts refused for their author (core/membership/authorship.py), by kind; and the
            # members an issuer removed.
            info["gossip_refused"] = dict(view.gossip.refused)
            if self.keyspaces.refused:  # definitions changed without an issuer's seal
                info["gossip_refused"]["keyspace"] = self.keyspaces.refused
            info["removed"] = sorted(view.gossip.removals)
        return info

    def storage(self) -> dict[str, Any]:
        """Disk figures of an LSM-backed node ({} for the in-memory store)."""
        return dict(self.store.disk_figures())

    def members(self, now: float, placement: bool = False) -> list[MemberRow]:
        """The membership table as this node sees it (the `members` command); with `placement`,
        where each member is as well: its token positions (`token_positions`, a client draws the
        ring from them) and its HTTP address (`http`)."""
        view = self.ring_view
        if view.gossip is None:
            rows: list[MemberRow] = [
                {"id": p, "up": view.is_up(p, now), "status": "normal"} for p in view.ring.nodes
            ]
            if placement:
                placed = view.ring.tokens_by_node()
                for row in rows:
                    row["token_positions"] = placed.get(row["id"], [])
            return rows
        rows = view.gossip.view(now)
        if placement:
            states = view.gossip.membership.members
            for row in rows:
                state = states[str(row["id"])]
                row["token_positions"], row["http"] = list(state.tokens), state.http
        return rows

    def member_states(self) -> tuple[MemberState, ...]:
        """The membership table as this node holds it, each member's state as gossip carries it
        (without gossip: the ring's nodes, each normal). Cheap: no failure detector is asked."""
        view = self.ring_view
        if view.gossip is not None:
            return tuple(view.gossip.membership.members.values())
        placed = view.ring.tokens_by_node()
        return tuple(MemberState(n, view.ring.zones[n], tuple(placed.get(n, []))) for n in view.ring.nodes)

    def hints_summary(self, now: float) -> list[HintQueueRow]:
        """One row per target this node holds hints for."""
        return [
            {"holder": self.node_id, "target": s.target, "count": s.count, "oldest_s": round(s.oldest_s, 3)}
            for s in self.hints.summary(now)
        ]

    def records(self, keyspace: str, key: str) -> tuple[Record | None, Record | None]:
        """The node's own record of a key, and the merge of the hints it holds for it."""
        return self.store.get(keyspace, key), self.hints.record_for(keyspace, key)

    def digests(self) -> list[list[Any]]:
        """Every record the node holds as [keyspace, key, digest]: enough to compare replicas."""
        store = self.store
        return [[ks, key, digest(rec)] for ks in store.keyspaces() for key, rec in store.items(ks)]

    def tree_entries(self, keyspace: str, lo: int, hi: int) -> list[list[Any]]:
        """[token, key, digest] of every record in one range, for a Merkle comparison drawn by a tool."""
        entries = sorted(self.hash_index.space(keyspace).entries(lo, hi), key=lambda e: e[1])
        return [[t, k, d] for t, k, d in entries]

    def range_hashes(self, ranges: list[tuple[int, int]]) -> list[list[Any]]:
        """[keyspace, lo, hi, hash (hex)] of every keyspace this node knows or holds, for each
        range (lo, hi]: the root of that range's Merkle tree, read from the hash index. Two
        replicas hold the same records in a range exactly when their hashes agree."""
        names = sorted({*self.store.keyspaces(), *(ks.name for ks in self.keyspaces.all())})
        return [
            [name, lo, hi, as_hash(space.arc_hash(lo, hi)).hex()]
            for name in names
            for space in (self.hash_index.space(name),)
            for lo, hi in ranges
        ]


def oldest_hint_age(queues: Iterable[HintQueueRow]) -> float:
    """Seconds the oldest of these hint queues' hints (`hints_summary` rows) has waited; 0 when
    none waits."""
    return max((q["oldest_s"] for q in queues), default=0.0)


def _repair_summary(ages: dict[str, float | None]) -> RepairSummary:
    """Per-range repair ages, summed up: how many ranges, how many never repaired, the oldest."""
    known = [a for a in ages.values() if a is not None]
    return {
        "ranges": len(ages),
        "never": len(ages) - len(known),
        "oldest_s": max(known) if known else None,
        "ages": ages,
    }
