"""Read-only views of one node's state for tools (status, members, hints, records, digests, trees,
range hashes),
as plain data: the in-process client renders them directly, a node process serves them over RPC."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict
from typing import Any

from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.membership.ringview import RingView
from bhandar_cli.core.model.keyspaces import Keyspaces
from bhandar_cli.core.model.record_digest import digest
from bhandar_cli.core.model.records import Record
from bhandar_cli.core.model.sibling_limit import SiblingLimit
from bhandar_cli.core.model.store import Store
from bhandar_cli.core.repair.antientropy import AntiEntropy
from bhandar_cli.core.repair.hash_index import HashIndex
from bhandar_cli.core.repair.merkle import as_hash
from bhandar_cli.core.roles.hints import HintQueue
from bhandar_cli.core.roles.streaming import Streaming


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

    def info(self, now: float, counts: bool = True) -> dict[str, Any]:
        """The node's status. `counts=False` skips the key count, a scan of the whole store: views
        that only want keyspaces, liveness or disk figures (the REPL's toolbar, several times a
        second). `status` and `tokens` only when the node gossips (its driver knows them otherwise)."""
        view = self.ring_view
        info: dict[str, Any] = {
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

    def members(self, now: float, placement: bool = False) -> list[dict[str, Any]]:
        """The membership table as this node sees it (the `members` command); with `placement`,
        where each member is as well: its token positions (`token_positions`, a client draws the
        ring from them) and its HTTP address (`http`)."""
        view = self.ring_view
        if view.gossip is None:
            rows: list[dict[str, Any]] = [
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

    def hints_summary(self, now: float) -> list[dict[str, Any]]:
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


def oldest_hint_age(queues: Iterable[Mapping[str, Any]]) -> float:
    """Seconds the oldest of these hint queues' hints (`hints_summary` rows) has waited; 0 when
    none waits."""
    return max((float(q["oldest_s"]) for q in queues), default=0.0)


def _repair_summary(ages: dict[str, float | None]) -> dict[str, Any]:
    """Per-range repair ages, summed up: how many ranges, how many never repaired, the oldest."""
    known = [a for a in ages.values() if a is not None]
    return {
        "ranges": len(ages),
        "never": len(ages) - len(known),
        "oldest_s": max(known) if known else None,
        "ages": ages,
    }
