"""Hinted handoff delivery: a fallback sends its hints home when the target is seen up again.

Some hints must not wait for their target: expired ones (the target has been away longer than
`hint_max_age`), those for a target that left the ring, and all of them when this node is leaving
the ring itself. Each goes instead to a home replica of its key that is up (and stays here if this
node has become one); anti-entropy carries it to the target later. Under a sloppy quorum a hint
may be the only copy of an acknowledged write, so a hint is removed only once a replica holds it.
"""

from __future__ import annotations

from bhandar_cli.core.config import KeyspaceDef
from bhandar_cli.core.messages import (
    Effect,
    ReplicaAck,
    ReplicaWrite,
    Send,
)
from bhandar_cli.core.node_base import NodeBase
from bhandar_cli.core.quorum import Op
from bhandar_cli.core.records import Record, merge_records
from bhandar_cli.core.ring import key_token

Delivery = tuple[str, tuple[str, str, Record]]  # (destination, (keyspace, key, record))


class HandoffRole(NodeBase):
    """Delivers hints in bounded batches, one batch in flight per target."""

    def _deliver_hints(self, now: float) -> list[Effect]:
        out: list[Effect] = []
        for target in self.hints.targets():
            if self._handoffs_in_flight.get(target):
                continue
            if self.liveness.is_up(target, now):
                batch: list[Delivery] = [
                    (target, h) for h in self.hints.batch(target, self.config.hint_batch)
                ]
            else:
                batch = self._redirected(now, target)
            self._handoffs_in_flight[target] = len(batch)
            for destination, (keyspace, key, record) in batch:
                op = Op(
                    "handoff",
                    0,
                    None,
                    now,
                    now + self.config.request_timeout,
                    extra=(target, keyspace, key, record),
                )
                op_id = self._new_op(op)
                ks = self.keyspaces.get(keyspace) or KeyspaceDef(keyspace)
                out.append(Send(destination, ReplicaWrite(op_id, ks, key, record, None, "handoff")))
        return out

    def _redirected(self, now: float, target: str) -> list[Delivery]:
        """Hints for `target` (down) that must not wait for it, each with a home replica to take it."""
        membership = self.gossip.membership if self.gossip is not None else None
        leaving = membership is not None and membership.mine.status in ("leaving", "left")
        gone = membership is not None and membership.status_of(target) == "left"
        limit = self.config.hint_batch
        hints = self.hints.batch(target, limit) if leaving or gone else self.hints.overdue(target, now, limit)
        if not hints:
            return []
        ring = membership.ring("future") if leaving and membership is not None else self.ring
        out: list[Delivery] = []
        for keyspace, key, record in hints:
            ks = self.keyspaces.get(keyspace) or KeyspaceDef(keyspace)
            home = ring.preference_list(key_token(keyspace, key), ks.n)
            if self.id in home:  # the ring moved and this node is a replica of the key now
                merged = merge_records(ks.policy, self.store.get(keyspace, key), record)
                if merged is not None:
                    self.store.put(keyspace, key, merged)
                if self.hints.remove(target, keyspace, key, delivered=record):
                    self.metrics.hints_delivered += 1
                continue
            up = [node for node in home if node != target and self.liveness.is_up(node, now)]
            if up:
                out.append((up[0], (keyspace, key, record)))
        return out

    def _on_handoff_ack(self, msg: ReplicaAck, op: Op) -> list[Effect]:
        self.ops.pop(msg.op, None)
        target, keyspace, key, record = op.extra  # type: ignore[misc]
        self._handoffs_in_flight[target] = max(0, self._handoffs_in_flight.get(target, 1) - 1)
        if msg.ok and self.hints.remove(target, keyspace, key, delivered=record):
            self.metrics.hints_delivered += 1
        return []
