"""The state every role of a node shares, and the plumbing of requests in flight."""

from __future__ import annotations

import heapq
from dataclasses import replace

from bhandar_cli.core.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.gossip import GossipLiveness
from bhandar_cli.core.hints import HintQueue
from bhandar_cli.core.liveness import Liveness
from bhandar_cli.core.messages import (
    ClientReply,
    Effect,
    Failure,
    ReplicaAck,
    Respond,
    Result,
    Send,
)
from bhandar_cli.core.metrics import NodeMetrics
from bhandar_cli.core.quorum import Op
from bhandar_cli.core.records import Record, merge_records
from bhandar_cli.core.ring import Ring
from bhandar_cli.core.store import Store


class NodeBase:
    """State and plumbing shared by the node's roles (the attributes are set by `Node.__init__`)."""

    id: str
    home_actor: str  # the dot actor as a home replica: the node id, or a new one after a restore
    ring: Ring
    gossip: GossipLiveness | None
    store: Store
    config: NodeConfig
    liveness: Liveness
    keyspaces: dict[str, KeyspaceDef]
    hints: HintQueue
    metrics: NodeMetrics
    ops: dict[int, Op]
    _timers: list[tuple[float, int]]
    _next_op: int
    _handoffs_in_flight: dict[str, int]

    def _on_handoff_ack(self, msg: ReplicaAck, op: Op) -> list[Effect]:
        raise NotImplementedError  # provided by HandoffRole

    def _learn(self, ks: KeyspaceDef) -> None:
        raise NotImplementedError  # provided by Node

    def is_up(self, peer: str, now: float) -> bool:
        return self.liveness.is_up(peer, now)

    def _policy(self, keyspace: str) -> str:
        ks = self.keyspaces.get(keyspace)
        return ks.policy if ks is not None else "siblings"

    def _local_view(self, keyspace: str, key: str) -> Record | None:
        """What this node holds for a key: its own copy merged with any hints it keeps for it."""
        own = self.store.get(keyspace, key)
        hinted = self.hints.record_for(keyspace, key)
        if hinted is None:
            return own
        return merge_records(self._policy(keyspace), own, hinted)

    def _new_op(self, op: Op) -> int:
        op_id = self._next_op
        self._next_op += 1
        self.ops[op_id] = op
        heapq.heappush(self._timers, (op.deadline, op_id))
        return op_id

    def _finish(self, now: float, op: Op, result: Result, durable: bool = False) -> Effect:
        ok = not isinstance(result, Failure)
        self.metrics.observe(op.kind, op.level, ok, (now - op.started) * 1000.0)
        if op.trace is not None:
            op.note(now, "answered the client" if ok else f"failed: {result.error}")  # type: ignore[union-attr]
            result = replace(result, trace=tuple(op.trace))
        return self._answer(op.rid, op.origin, result, durable)

    def _answer(self, rid: int, origin: str | None, result: Result, durable: bool = False) -> Effect:
        if origin is None:
            return Respond(rid, result, durable)
        return Send(origin, ClientReply(rid, result), durable)
