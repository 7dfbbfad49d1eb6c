"""The read path: asking R replicas, merging their answers, and read repair afterwards."""

from __future__ import annotations

from collections.abc import Iterable

from bhandar_cli.core.config import KeyspaceDef, required
from bhandar_cli.core.crdt import PNCounter
from bhandar_cli.core.messages import (
    Effect,
    GetRequest,
    GetResult,
    ReplicaRead,
    ReplicaReadReply,
    ReplicaWrite,
    Send,
)
from bhandar_cli.core.node_base import NodeBase
from bhandar_cli.core.quorum import Op, Plan
from bhandar_cli.core.records import Record, Versioned, merge_records
from bhandar_cli.core.versions import Sibling, covers


class ReadRole(NodeBase):
    """Coordinator side of reads (a replica answers a read from its local view)."""

    def _coordinate_get(
        self, now: float, req: GetRequest, origin: str | None, ks: KeyspaceDef, plan: Plan
    ) -> list[Effect]:
        needed = required(req.consistency, ks.n)
        if len(plan.targets) < needed:
            return [self._answer(req.rid, origin, self._unavailable(ks, plan, req.consistency))]
        self.metrics.coordinated += 1
        op = Op("get", req.rid, origin, now, now + self.config.request_timeout, needed, req.consistency)
        op.keyspace, op.key, op.targets, op.extra = ks.name, req.key, plan.targets, plan
        if req.trace:
            op.trace = []
            op.note(now, f"{self.id} coordinates get {ks.name}/{req.key}, asks {', '.join(plan.targets)}")
        op_id = self._new_op(op)
        out: list[Effect] = []
        read = ReplicaRead(op_id, ks, req.key)
        for target in plan.targets:
            if target == self.id:
                op.replies[self.id] = self._local_view(ks.name, req.key)
                if op.trace is not None:  # building the text costs more than the read itself
                    op.note(now, f"read own copy: {_describe(op.replies[self.id])}")
            else:
                out.append(Send(target, read))
        out.extend(self._check_read(now, op_id, op))
        return out

    def _on_read_reply(self, now: float, src: str, msg: ReplicaReadReply) -> list[Effect]:
        op = self.ops.get(msg.op)
        if op is None or op.kind != "get" or src in op.replies:
            return []
        op.replies[src] = msg.record
        if op.trace is not None:
            op.note(now, f"{src} answered: {_describe(msg.record)}")
        return self._check_read(now, msg.op, op)

    def _check_read(self, now: float, op_id: int, op: Op) -> list[Effect]:
        out: list[Effect] = []
        if not op.answered and len(op.replies) >= op.needed:
            op.answered = True
            merged = self._merge_replies(op)
            dropped = _lww_dropped(op.replies.values(), merged) if self._policy(op.keyspace) == "lww" else ()
            result = GetResult(self.id, merged, len(op.replies), op.needed, (), dropped)
            out.append(self._finish(now, op, result))
        if len(op.replies) >= len(op.targets):
            self.ops.pop(op_id, None)
            out.extend(self._read_repair(now, op))
        return out

    def _merge_replies(self, op: Op) -> Record | None:
        policy = self._policy(op.keyspace)
        merged: Record | None = None
        for record in op.replies.values():
            merged = merge_records(policy, merged, record)
        return merged

    def _read_repair(self, now: float, op: Op) -> list[Effect]:
        """Send the merged version to home replicas that answered with less."""
        if not self.config.read_repair or len(op.replies) < 2:
            return []
        merged = self._merge_replies(op)
        if merged is None:
            return []
        plan = op.extra
        assert isinstance(plan, Plan)
        ks = self.keyspaces[op.keyspace]
        out: list[Effect] = []
        stale = [n for n, rec in op.replies.items() if rec != merged and n not in plan.hint_for]
        for node in stale:
            if node == self.id:
                # Merge into what the store holds *now*: a write may have landed here since this
                # node read its own copy, and overwriting would drop it (and let this node hand out
                # its dot again). Found by `bhandar chaos --seed 1 --ops 2000`.
                current = self.store.get(ks.name, op.key)
                repaired = merge_records(ks.policy, current, merged)
                if repaired is not None and repaired != current:
                    self.store.put(ks.name, op.key, repaired)
            else:
                out.append(Send(node, ReplicaWrite(0, ks, op.key, merged, None, "repair")))
            if op.trace is not None:
                op.note(now, f"read repair: sent the merged version to {node}")
        if stale:
            self.metrics.stale_reads += 1
            self.metrics.read_repairs += len(stale)
        return out


def _describe(record: Record | None) -> str:
    if record is None:
        return "nothing"
    if isinstance(record, PNCounter):
        return f"counter {record.value}"
    dots = ", ".join(
        f"{s.dot[0]}:{s.dot[1]}" + (" (tombstone)" if s.value is None else "") for s in record.siblings
    )
    return f"{len(record.siblings)} sibling(s) [{dots}]"


def _lww_dropped(replies: Iterable[Record | None], merged: Record | None) -> tuple[Sibling, ...]:
    """Versions some replica held that last-writer-wins threw away without the winner having seen
    them (its context does not cover them): a concurrent write silently lost."""
    if not isinstance(merged, Versioned) or not merged.siblings:
        return ()
    winner = merged.siblings[0]
    seen: dict[tuple[str, int], Sibling] = {}
    for record in replies:
        if isinstance(record, Versioned):
            for s in record.siblings:
                if s.dot != winner.dot and not covers(winner.context, s.dot):
                    seen[s.dot] = s
    return tuple(seen[d] for d in sorted(seen))
