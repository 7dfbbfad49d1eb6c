"""Hinted handoff delivery: a fallback sends its hints home when the target is seen up again."""

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


class HandoffRole(NodeBase):
    """Delivers hints in bounded batches, one batch in flight per target."""

    def _deliver_hints(self, now: float) -> list[Effect]:
        out: list[Effect] = []
        for target in self.hints.targets():
            if self._handoffs_in_flight.get(target) or not self.liveness.is_up(target, now):
                continue
            batch = self.hints.batch(target, self.config.hint_batch)
            self._handoffs_in_flight[target] = len(batch)
            for keyspace, key, record in batch:
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
                out.append(Send(target, ReplicaWrite(op_id, ks, key, record, None, "handoff")))
        return out

    def _on_handoff_ack(self, msg: ReplicaAck, op: Op) -> list[Effect]:
        self.ops.pop(msg.op, None)
        target, keyspace, key, record = op.extra  # type: ignore[misc]
        self._handoffs_in_flight[target] = max(0, self._handoffs_in_flight.get(target, 1) - 1)
        if msg.ok and self.hints.remove(target, keyspace, key, delivered=record):
            self.metrics.hints_delivered += 1
        return []
