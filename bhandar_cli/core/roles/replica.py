"""The replica role: what this node holds for a key, storing writes and hints, and answering the
replica reads and writes coordinators send it."""

from __future__ import annotations

from bhandar_cli.core.model import Record, merge_records
from bhandar_cli.core.protocol import Effect, ReplicaAck, ReplicaRead, ReplicaReadReply, ReplicaWrite, Send
from bhandar_cli.core.repair import Unrepaired
from bhandar_cli.core.roles.role_context import RoleContext


class Replica:
    """One node's copy of the data: its own records, and the hints it keeps for down replicas."""

    def __init__(self, context: RoleContext, unrepaired: Unrepaired) -> None:
        self.node_id = context.node_id
        self.store = context.store
        self.hints = context.hints
        self.keyspaces = context.keyspaces
        self.ring_view = context.ring_view
        self.metrics = context.metrics
        self.sibling_limit = context.sibling_limit
        self.unrepaired = unrepaired  # keyspaces whose copy here lost records: it answers no read

    def local_view(self, keyspace: str, key: str) -> Record | None:
        """What this node holds for a key: its own copy merged with any hints it keeps for it."""
        own = self.store.get(keyspace, key)
        hinted = self.hints.record_for(keyspace, key)
        if hinted is None:
            return own
        return merge_records(self.keyspaces.policy(keyspace), own, hinted)

    def store_local(self, now: float, keyspace: str, key: str, record: Record, hint_for: str | None) -> bool:
        """Store a coordinated write here: as this node's copy, or as a hint for `hint_for`.
        False when the hint queue for that node is full (nothing stored)."""
        if hint_for is not None:
            if not self.hints.add(now, hint_for, keyspace, key, record):
                self.metrics.hints_refused += 1
                return False
            self.metrics.hints_stored += 1
            return True
        self.store.put(keyspace, key, record)
        return True

    def on_read(self, now: float, src: str, msg: ReplicaRead) -> list[Effect]:
        self.metrics.replica_requests += 1
        self.keyspaces.learn(msg.keyspace)
        if msg.keyspace.name in self.unrepaired:
            # Its copy may be older than what it acknowledged (or hold a deleted value again): no
            # answer, so the coordinator counts on the other replicas, as if this one were down.
            # (An answer saying so would need a new protocol version; this needs none.)
            return []
        return [Send(src, ReplicaReadReply(msg.op, self.local_view(msg.keyspace.name, msg.key)))]

    def on_write(self, now: float, src: str, msg: ReplicaWrite) -> list[Effect]:
        self.metrics.replica_requests += 1
        status = self.ring_view.status
        if status == "left" or (status == "leaving" and msg.kind == "handoff"):
            # A node that left (or is leaving: it has streamed its data away) must not become the
            # last holder of a write: it would leave with it. Refused, a coordinator counts it as
            # failed, and a hint holder keeps the hint and hands it to a replica of the key once
            # the node has left (handoff.py). Found by `bhandar chaos --seed 238 --ops 3000` and
            # `--seed 137 --ops 3000 --storage lsm`.
            return [Send(src, ReplicaAck(msg.op, False, f"{self.node_id} is leaving the ring"))]
        self.keyspaces.learn(msg.keyspace)
        ks = msg.keyspace.name
        if msg.hint_for is not None and msg.hint_for != self.node_id:
            if not self.store_local(now, ks, msg.key, msg.record, msg.hint_for):
                error = f"hint queue for {msg.hint_for} on {self.node_id} is full"
                return [Send(src, ReplicaAck(msg.op, False, error))]
        else:
            merged = merge_records(msg.keyspace.policy, self.store.get(ks, msg.key), msg.record)
            assert merged is not None  # merging a record into anything gives a record
            self.store.put(ks, msg.key, merged)
            self.sibling_limit.stored(ks, msg.key, merged)
        return [Send(src, ReplicaAck(msg.op), durable=True)]
