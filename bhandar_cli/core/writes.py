"""The write path: coordinating put, delete and incr, storing replica writes, counting acks."""

from __future__ import annotations

from bhandar_cli.core.config import KeyspaceDef
from bhandar_cli.core.crdt import EMPTY_COUNTER, PNCounter
from bhandar_cli.core.messages import (
    Effect,
    Failure,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
    ReplicaAck,
    ReplicaWrite,
    Result,
    Send,
)
from bhandar_cli.core.node_base import NodeBase
from bhandar_cli.core.quorum import Op, Plan
from bhandar_cli.core.records import Record, Versioned, merge_records
from bhandar_cli.core.versions import Sibling, covers, live_values, lww_merge, merge_siblings, next_dot, prune


class WriteRole(NodeBase):
    """Coordinator and replica sides of writes."""

    def _coordinate_put(
        self, now: float, req: PutRequest, origin: str | None, ks: KeyspaceDef, plan: Plan, needed: int
    ) -> list[Effect]:
        local = self._local_view(ks.name, req.key)
        siblings = local.siblings if isinstance(local, Versioned) else ()
        actor = self._actor(plan)
        context = req.context or {}
        dot = self._unused_dot(ks.name, req.key, next_dot(siblings, actor, context))
        sibling = Sibling(dot, prune(context, actor, self.config.max_vv_entries), req.value, req.ctype, now)
        merged = (
            lww_merge(siblings, (sibling,)) if ks.policy == "lww" else merge_siblings(siblings, (sibling,))
        )
        live = len(live_values(merged))
        if live > self.config.sibling_max:
            failure = Failure(
                "refused",
                f"{req.key} would have {live} siblings (limit {self.config.sibling_max}): "
                "read it, merge the siblings and write back with the context",
                coordinator=self.id,
            )
            return [self._answer(req.rid, origin, failure)]
        warnings: tuple[str, ...] = ()
        if live > self.config.sibling_warn:
            warnings = (
                f"{req.key} has {live} siblings; merge them (the limit is {self.config.sibling_max})",
            )
        if ks.policy == "lww":
            lost = [s for s in siblings if s.dot != merged[0].dot and not covers(context, s.dot)]
            if lost:
                warnings += (
                    f"last-writer-wins replaced {len(lost)} version(s) this write had not seen "
                    f"({', '.join(f'{s.dot[0]}:{s.dot[1]}' for s in lost)}): they are gone",
                )
        kind = "delete" if req.value is None else "put"
        op = Op(kind, req.rid, origin, now, now + self.config.request_timeout, needed, req.consistency)
        op.keyspace, op.key, op.warnings = ks.name, req.key, warnings
        if req.trace:
            op.trace = []
            op.note(
                now, f"{self.id} coordinates {kind} {ks.name}/{req.key} as {dot[0]}:{dot[1]}, needs {needed}"
            )
        return self._replicate(now, op, ks, req.key, Versioned(merged), plan)

    def _coordinate_incr(
        self, now: float, req: IncrRequest, origin: str | None, ks: KeyspaceDef, plan: Plan, needed: int
    ) -> list[Effect]:
        local = self._local_view(ks.name, req.key)
        counter = local if isinstance(local, PNCounter) else EMPTY_COUNTER
        # A retried request id already counted here is not applied again, but it is still
        # replicated: the first attempt may have failed before reaching W replicas.
        counter = counter.increment(self._actor(plan), req.delta, req.request_id)
        op = Op("incr", req.rid, origin, now, now + self.config.request_timeout, needed, req.consistency)
        op.keyspace, op.key, op.result_value = ks.name, req.key, counter.value
        if req.trace:
            op.trace = []
            op.note(now, f"{self.id} coordinates incr {ks.name}/{req.key} by {req.delta}, needs {needed}")
        return self._replicate(now, op, ks, req.key, counter, plan)

    def _actor(self, plan: Plan) -> str:
        """The dot's actor: this node, or a fresh actor when coordinating as a fallback.

        A fallback forgets a key once its hint is handed off; with a fresh actor id it can never
        reuse a dot or claim to have seen dots it no longer holds.
        """
        if self.id in plan.home:
            return self.home_actor
        epoch = int(self.store.get_meta("epoch") or 0) + 1
        self.store.put_meta("epoch", epoch)
        return f"{self.id}~{epoch}"

    def _unused_dot(self, keyspace: str, key: str, dot: tuple[str, int]) -> tuple[str, int]:
        """`dot`, or a later one if this node's actor already used its counter for this key.

        The record alone may have forgotten a dot: once the sibling is superseded, only contexts
        remember it, and contexts are pruned past `max_vv_entries` (smallest counters first), so
        the actor would mint the same dot for a new write, which any context that saw the old one
        covers. Found by `bhandar chaos --seed 350 --ops 3000 --faults all --storage lsm`.
        Fallback actors are new for every write and need no memory.
        """
        actor, counter = dot
        if actor != self.home_actor:
            return dot
        name = f"dot:{keyspace}/{key}"
        used = int(self.store.get_meta(name) or 0)
        if counter <= used:
            counter = used + 1
        self.store.put_meta(name, counter)  # durable with the write: the driver syncs before sending
        return (actor, counter)

    def _replicate(
        self, now: float, op: Op, ks: KeyspaceDef, key: str, record: Record, plan: Plan
    ) -> list[Effect]:
        if not self._store_local(now, ks.name, key, record, plan.hint_for.get(self.id)):
            failure = Failure("refused", f"{self.id} cannot take another hint for {plan.hint_for[self.id]}")
            return [self._answer(op.rid, op.origin, failure)]
        op.targets = plan.targets + plan.pending
        op.acks.add(self.id)
        op.hinted = tuple(f"{f} for {h}" for f, h in plan.hint_for.items())
        op_id = self._new_op(op)
        out: list[Effect] = []
        for target in op.targets:
            if target != self.id:
                hint_for = plan.hint_for.get(target)
                out.append(Send(target, ReplicaWrite(op_id, ks, key, record, hint_for), durable=True))
                if op.trace is not None:
                    op.note(now, f"sent to {target}" + (f" (hint for {hint_for})" if hint_for else ""))
        if "ack_before_quorum" in self.config.bugs:
            op.needed = 1  # planted bug: acknowledge on the coordinator's copy alone
        out.extend(self._check_write(now, op_id, op))
        return out

    def _store_local(self, now: float, keyspace: str, key: str, record: Record, hint_for: str | None) -> bool:
        if hint_for is not None:
            if not self.hints.add(now, hint_for, keyspace, key, record):
                self.metrics.hints_refused += 1
                return False
            self.metrics.hints_stored += 1
            return True
        self.store.put(keyspace, key, record)
        return True

    def _on_replica_write(self, now: float, src: str, msg: ReplicaWrite) -> list[Effect]:
        self.metrics.replica_requests += 1
        status = self.gossip.membership.mine.status if self.gossip is not None else "normal"
        if status == "left" or (status == "leaving" and msg.kind == "handoff"):
            # A node that left (or is leaving: it has streamed its data away) must not become the
            # last holder of a write: it would leave with it. Refused, a coordinator counts it as
            # failed, and a hint holder keeps the hint and hands it to a replica of the key once
            # the node has left (handoff.py). Found by `bhandar chaos --seed 238 --ops 3000` and
            # `--seed 137 --ops 3000 --storage lsm`.
            return [Send(src, ReplicaAck(msg.op, False, f"{self.id} is leaving the ring"))]
        self._learn(msg.keyspace)
        ks = msg.keyspace.name
        if msg.hint_for is not None and msg.hint_for != self.id:
            if not self._store_local(now, ks, msg.key, msg.record, msg.hint_for):
                return [
                    Send(
                        src, ReplicaAck(msg.op, False, f"hint queue for {msg.hint_for} on {self.id} is full")
                    )
                ]
        else:
            merged = merge_records(msg.keyspace.policy, self.store.get(ks, msg.key), msg.record)
            assert merged is not None
            self.store.put(ks, msg.key, merged)
        return [Send(src, ReplicaAck(msg.op), durable=True)]

    def _on_ack(self, now: float, src: str, msg: ReplicaAck) -> list[Effect]:
        op = self.ops.get(msg.op)
        if op is None:
            return []
        if op.kind == "handoff":
            return self._on_handoff_ack(msg, op)
        if msg.ok:
            op.acks.add(src)
            if op.trace is not None:
                op.note(now, f"ack from {src}")
        else:
            op.failed[src] = msg.error
            op.note(now, f"{src} refused: {msg.error}")
        return self._check_write(now, msg.op, op)

    def _check_write(self, now: float, op_id: int, op: Op) -> list[Effect]:
        out: list[Effect] = []
        if not op.answered:
            if len(op.acks) >= op.needed:
                op.answered = True
                out.append(self._finish(now, op, self._write_result(op), durable=True))
            elif len(op.targets) - len(op.failed) < op.needed:
                op.answered = True
                reasons = "; ".join(op.failed.values())
                failure = Failure(
                    "refused",
                    f"{len(op.acks)} of {len(op.targets)} replicas stored the write, {op.level} needs "
                    f"{op.needed}: {reasons}",
                    answered=len(op.acks),
                    needed=op.needed,
                    coordinator=self.id,
                )
                out.append(self._finish(now, op, failure))
        if len(op.acks) + len(op.failed) >= len(op.targets):
            self.ops.pop(op_id, None)
        return out

    def _write_result(self, op: Op) -> Result:
        trace = tuple(op.trace or ())
        if op.kind == "incr":
            return IncrResult(self.id, op.result_value, len(op.acks), op.needed, trace)
        return PutResult(self.id, len(op.acks), op.needed, op.warnings, op.hinted, trace)
