"""The read path of a coordinator: asking the replicas, answering after R replies, read repair.

The coordinator answers with the merge of the first R replies (its own view among them when it is a
target), keeps listening until every target answered or the deadline passed, then sends the merged
record to the home replicas that answered with less (read repair).

A read at ONE coordinated by one of the key's replicas is answered from that replica's own copy
and asks no one else: the answer would be the same (the first reply is its own), and waiting on the
others only to repair them made ONE cost what QUORUM costs. Such a read repairs nothing; the
replicas it did not ask are brought up to date by anti-entropy, or by the next read at QUORUM or
ALL. A coordinator that holds no copy asks every target, answers with the first reply and repairs
as any other read does.
"""

from __future__ import annotations

from collections.abc import Iterable

from bhandar_cli.core.model import (
    KeyspaceDef,
    NodeConfig,
    PNCounter,
    Record,
    Sibling,
    Versioned,
    count,
    covers,
    live_siblings,
    merge_records,
    over_limit_warning,
    required,
)
from bhandar_cli.core.protocol import (
    Effect,
    Failure,
    GetRequest,
    GetResult,
    PendingRead,
    ReadProgress,
    ReplicaRead,
    ReplicaReadReply,
    ReplicaWrite,
    Send,
    Trace,
    finish,
    refuse,
)
from bhandar_cli.core.roles.expiry import expire
from bhandar_cli.core.roles.quorum import Plan, unavailable
from bhandar_cli.core.roles.replica import Replica
from bhandar_cli.core.roles.role_context import RoleContext


class ReadCoordinator:
    """Coordinates the reads this node receives, and repairs the replicas they find stale."""

    def __init__(self, context: RoleContext, config: NodeConfig, replica: Replica) -> None:
        self.node_id = context.node_id
        self.config = config
        self.store = context.store
        self.keyspaces = context.keyspaces
        self.replica = replica
        self.pending = context.pending
        self.metrics = context.metrics

    def get(
        self, now: float, req: GetRequest, origin: str | None, ks: KeyspaceDef, plan: Plan
    ) -> list[Effect]:
        needed = required(req.consistency, ks.n)
        if len(plan.targets) < needed:
            return [refuse(req, origin, unavailable(self.node_id, ks, plan, req.consistency))]
        targets = plan.targets
        if self.node_id in targets and ks.name in self.replica.unrepaired:
            # This node's copy lost records to storage damage (core/repair/unrepaired.py): ask
            # only the others until anti-entropy has repaired it.
            targets = tuple(t for t in targets if t != self.node_id)
            if len(targets) < needed:
                return [refuse(req, origin, _unrepaired(self.node_id, ks, targets, req.consistency, needed))]
        elif needed == 1 and self.node_id in targets:
            targets = (self.node_id,)
        self.metrics.coordinated += 1
        trace = None
        if req.trace:
            trace = Trace(now)
            trace.note(now, f"{self.node_id} coordinates get {ks.name}/{req.key}, asks {', '.join(targets)}")
        op = PendingRead(
            rid=req.rid,
            origin=origin,
            started=now,
            deadline=now + self.config.request_timeout,
            level=req.consistency,
            keyspace=ks.name,
            key=req.key,
            needed=needed,
            targets=targets,
            fallbacks=frozenset(plan.hint_for),
            trace=trace,
            progress=ReadProgress(),
        )
        op_id = self.pending.add(op)
        out: list[Effect] = []
        read = ReplicaRead(op_id, ks, req.key)
        replies = op.progress.replies
        for target in targets:
            if target == self.node_id:
                replies[target] = self.replica.local_view(ks.name, req.key)
                if trace is not None:  # building the text costs more than the read itself
                    trace.note(now, f"read own copy: {_describe(replies[target])}")
            else:
                out.append(Send(target, read))
        out.extend(self._check(now, op_id, op))
        return out

    def on_reply(self, now: float, src: str, msg: ReplicaReadReply) -> list[Effect]:
        op = self.pending.get(msg.op)
        if not isinstance(op, PendingRead) or src in op.progress.replies:
            return []
        op.progress.replies[src] = msg.record
        if op.trace is not None:
            op.trace.note(now, f"{src} answered: {_describe(msg.record)}")
        return self._check(now, msg.op, op)

    def _check(self, now: float, op_id: int, op: PendingRead) -> list[Effect]:
        out: list[Effect] = []
        progress = op.progress
        if not progress.answered and len(progress.replies) >= op.needed:
            progress.answered = True
            merged = self._merge_replies(op, now)
            lww = self.keyspaces.policy(op.keyspace) == "lww"
            dropped = _lww_dropped(progress.replies.values(), merged) if lww else ()
            ttl = self.keyspaces[op.keyspace].ttl if dropped else 0
            if ttl:  # an expired version was gone anyway: last-writer-wins dropped nothing
                dropped = tuple(s for s in dropped if s.ts + ttl > now)
            live = live_siblings(merged)
            limit = self.config.sibling_max
            warnings = (over_limit_warning(op.key, live, limit),) if live > limit else ()
            result = GetResult(self.node_id, merged, len(progress.replies), op.needed, (), dropped, warnings)
            out.append(finish(now, op, result))
        if len(progress.replies) >= len(op.targets):
            self.pending.discard(op_id)
            out.extend(self._read_repair(now, op))
        return out

    def expire(self, now: float, op: PendingRead) -> list[Effect]:
        """The read's deadline passed: fail it if the client is still waiting, and repair the
        replicas that did answer."""
        progress = op.progress
        if progress.answered:
            return self._read_repair(now, op)
        progress.answered = True
        got = len(progress.replies)
        ms = (now - op.started) * 1000.0
        failure = Failure(
            "timeout",
            f"timed out after {ms:.0f} ms: {got} of {len(op.targets)} replicas answered, "
            f"{op.level} needs {op.needed}",
            answered=got,
            needed=op.needed,
            coordinator=self.node_id,
        )
        return [finish(now, op, failure), *self._read_repair(now, op)]

    def _merge_replies(self, op: PendingRead, now: float) -> Record | None:
        policy = self.keyspaces.policy(op.keyspace)
        merged: Record | None = None
        for record in op.progress.replies.values():
            merged = merge_records(policy, merged, record)
        # A value past its keyspace's ttl reads as the tombstone every replica will turn it into,
        # and read repair hands that tombstone to the replicas still holding the value.
        return expire(self.keyspaces.get(op.keyspace), merged, now)

    def _read_repair(self, now: float, op: PendingRead) -> list[Effect]:
        """Send the merged version to home replicas that answered with less."""
        replies = op.progress.replies
        if not self.config.read_repair or len(replies) < 2:
            return []
        merged = self._merge_replies(op, now)
        if merged is None:
            return []
        ks = self.keyspaces[op.keyspace]
        out: list[Effect] = []
        stale = [n for n, rec in replies.items() if rec != merged and n not in op.fallbacks]
        for node in stale:
            if node == self.node_id:
                # Merge into what the store holds *now*: a write may have landed here since this
                # node read its own copy, and overwriting would drop it (and let this node hand out
                # its dot again). Found by `bhandar chaos --seed 1 --ops 2000`.
                current = self.store.get(ks.name, op.key)
                repaired = merge_records(ks.policy, current, merged)
                if repaired is not None and repaired != current:
                    self.store.put(ks.name, op.key, repaired)
                    self.replica.sibling_limit.stored(ks.name, op.key, repaired)
            else:
                out.append(Send(node, ReplicaWrite(0, ks, op.key, merged, None, "repair")))
            if op.trace is not None:
                op.trace.note(now, f"read repair: sent the merged version to {node}")
        if stale:
            self.metrics.stale_reads += 1
            self.metrics.read_repairs += len(stale)
        return out


def _unrepaired(node: str, ks: KeyspaceDef, others: tuple[str, ...], level: str, needed: int) -> Failure:
    return Failure(
        "unavailable",
        f"{node} is repairing its copy of keyspace {ks.name} from the other replicas (storage damage "
        f"cost it records) and answers no read there until then; {len(others)} other replica(s) "
        f"reachable, {level} needs {needed}",
        answered=len(others),
        needed=needed,
        coordinator=node,
    )


def _describe(record: Record | None) -> str:
    if record is None:
        return "nothing"
    if isinstance(record, PNCounter):
        return f"counter {record.value}"
    dots = ", ".join(
        f"{s.dot[0]}:{s.dot[1]}" + (" (tombstone)" if s.value is None else "") for s in record.siblings
    )
    return f"{count(len(record.siblings), 'sibling')} [{dots}]"


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
