"""The write path of a coordinator: put, delete and incr, sent to the replicas, answered after W acks.

The coordinator merges the write into its own view of the key (its copy and any hints), stores the
result as a replica (or a fallback's hint), sends the whole merged record to the other targets at
once, while its own copy is being synced, and answers once `needed` of them, itself included,
acknowledged (its own copy once synced: every ack counted is durable). Only what a crash before
that sync could make the node repeat waits for the sync before it is sent: a dot above the lease's
saved mark (dot_lease.py), a fallback's fresh actor, a counter's increment (its per-actor entry).

While a range moves, the targets include the key's pending replicas; the coordinator keeps a hint
for each pending replica it believes down (see quorum.py for why they count in `needed` all the same).
"""

from __future__ import annotations

from bhandar_cli.core.membership import key_token
from bhandar_cli.core.model import (
    EMPTY_COUNTER,
    MAX_INTEGER,
    VOID,
    BadInput,
    Dot,
    KeyspaceDef,
    NodeConfig,
    PNCounter,
    Record,
    Sibling,
    Versioned,
    VersionVector,
    check_counter_total,
    compact,
    covers,
    live_values,
    lww_merge,
    merge_siblings,
    next_dot,
)
from bhandar_cli.core.protocol import (
    DotLeaseSaved,
    Effect,
    Failure,
    IncrRequest,
    IncrResult,
    PendingIncr,
    PendingPut,
    PendingWrite,
    PutRequest,
    PutResult,
    ReplicaAck,
    ReplicaWrite,
    Send,
    Trace,
    WriteProgress,
    finish,
    refuse,
)
from bhandar_cli.core.roles.dot_lease import DotLease
from bhandar_cli.core.roles.exact_dots import ExactDots, next_epoch
from bhandar_cli.core.roles.quorum import Plan
from bhandar_cli.core.roles.replica import Replica
from bhandar_cli.core.roles.role_context import RoleContext


class WriteCoordinator:
    """Coordinates the writes this node was chosen for, and counts their acknowledgements."""

    def __init__(
        self, context: RoleContext, config: NodeConfig, replica: Replica, lease: DotLease, exact: ExactDots
    ) -> None:
        self.node_id = context.node_id
        # The dot actor as a home replica (the node id, or a new one after a restore: see Node)
        # and its counter sequence; the dots it mints as a fallback (exact_dots.py).
        self.lease = lease
        self.exact = exact
        self.config = config
        self.store = context.store
        self.replica = replica
        self.pending = context.pending
        self.metrics = context.metrics

    def put(
        self,
        now: float,
        req: PutRequest,
        origin: str | None,
        ks: KeyspaceDef,
        plan: Plan,
        needed: int,
        trace: Trace | None = None,
    ) -> list[Effect]:
        """`trace`: the steps so far of a traced request that reached here by a fallback.

        The dot: the exact dot a forwarding node minted (`req.dot`: every coordinator that takes
        the put applies it under that dot); else, coordinating as a home replica, the next of the
        home actor's lease; else, as a fallback, this node's next exact dot of the key
        (exact_dots.py), minted only once nothing can refuse the write any more, so no gap is left."""
        local = self.replica.local_view(ks.name, req.key)
        siblings = local.siblings if isinstance(local, Versioned) else ()
        context = compact(dict(req.context or {}))
        home = self.node_id in plan.home
        dot: Dot | None = req.dot
        saved: DotLeaseSaved | None = None
        wait_for_sync = False
        if home:
            self._refuse_future(ks.name, req.key, siblings, context)
        if dot is None and home:
            dot, saved = self._dot(siblings, self.home_actor, context)
            # A dot the lease does not cover yet must not leave before the sync that saves the lease.
            wait_for_sync = dot[0] != self.home_actor or not self.lease.may_send(dot[1])
        hint_for = plan.hint_for.get(self.node_id)
        if hint_for is not None and not self.replica.hints.has_room(hint_for, ks.name, req.key):
            failure = Failure(
                "unavailable",
                f"{self.node_id} cannot take another hint for {hint_for}",
                coordinator=self.node_id,
            )
            return [refuse(req, origin, failure)]
        # A delete's tombstone carries no content type: one that does was left by expiry (expiry.py).
        ctype = req.ctype if req.value is not None else ""
        # A forwarded put is stamped as its forwarder stamped it: every coordinator's copy is the
        # same sibling.
        sibling = Sibling(dot or _UNMINTED, context, req.value, ctype, now if req.dot is None else req.ts)
        merged = _merge(ks, siblings, sibling)
        live = len(live_values(merged))
        if live > self.config.sibling_max:
            failure = Failure(
                "refused",
                f"{req.key} would have {live} siblings (limit {self.config.sibling_max}): "
                "read it, merge the siblings and write back with the context",
                coordinator=self.node_id,
            )
            # The lease's new mark, if this dot asked for one, must still be learned as saved.
            return [refuse(req, origin, failure), *([saved] if saved is not None else [])]
        if dot is None:
            dot = self.exact.mint(ks.name, req.key, context)
            wait_for_sync = True  # the key's counter is saved with the next sync
            sibling = Sibling(dot, context, req.value, ctype, now)
            merged = _merge(ks, siblings, sibling)
        warnings: tuple[str, ...] = ()
        if live > self.config.sibling_warn:
            warnings = (
                f"{req.key} has {live} siblings; merge them (the limit is {self.config.sibling_max})",
            )
        if ks.policy == "lww":
            # A value past its keyspace's ttl was already gone for every reader: not lost here.
            lost = [
                s
                for s in siblings
                if s.dot != merged[0].dot
                and not covers(context, s.dot)
                and not (ks.ttl and s.ts + ks.ttl <= now)
            ]
            if lost:
                warnings += (
                    f"last-writer-wins replaced {len(lost)} version(s) this write had not seen "
                    f"({', '.join(f'{s.dot[0]}:{s.dot[1]}' for s in lost)}): they are gone",
                )
        verb = "delete" if req.value is None else "put"
        if req.trace and trace is None:
            trace = Trace(now)
        if trace is not None:
            trace.note(
                now,
                f"{self.node_id} coordinates {verb} {ks.name}/{req.key} as {dot[0]}:{dot[1]}, needs {needed}",
            )
        op = PendingPut(
            verb=verb,
            rid=req.rid,
            origin=origin,
            started=now,
            deadline=now + self.config.request_timeout,
            level=req.consistency,
            keyspace=ks.name,
            key=req.key,
            needed=self._needed(needed),
            targets=plan.targets + plan.pending,
            hinted=tuple(f"{f} for {h}" for f, h in plan.hint_for.items())
            + tuple(f"{self.node_id} for {p}" for p in plan.pending_down),
            warnings=warnings,
            trace=trace,
            progress=WriteProgress(acks=set()),
            exact=req.dot is not None,
        )
        out = self._replicate(now, op, ks, Versioned(merged), plan, wait_for_sync)
        if saved is not None:
            out.append(saved)
        if (req.dot is None and not home) or (req.dot is not None and self.exact.mine(req.dot)):
            self.exact.settle(ks.name, req.key)  # stored here before anything was sent
        return out

    def incr(
        self, now: float, req: IncrRequest, origin: str | None, ks: KeyspaceDef, plan: Plan, needed: int
    ) -> list[Effect]:
        local = self.replica.local_view(ks.name, req.key)
        counter = local if isinstance(local, PNCounter) else EMPTY_COUNTER
        # A retried request id already counted here is not applied again, but it is still
        # replicated: the first attempt may have failed before reaching W replicas.
        before = counter.value
        # A fallback counts it under a fresh actor: it forgets the key once its hint is handed
        # over, so it could not carry on an entry of its own.
        actor = self.home_actor if self.node_id in plan.home else self._fresh_actor()
        incremented = counter.increment(actor, req.delta, req.request_id)
        # (`value` reads every request id the counter holds: worked out once per counter.)
        after = before if incremented is counter else incremented.value
        check_counter_total(req.key, before, after)
        counter = incremented
        trace = None
        if req.trace:
            trace = Trace(now)
            trace.note(
                now, f"{self.node_id} coordinates incr {ks.name}/{req.key} by {req.delta}, needs {needed}"
            )
        op = PendingIncr(
            rid=req.rid,
            origin=origin,
            started=now,
            deadline=now + self.config.request_timeout,
            level=req.consistency,
            keyspace=ks.name,
            key=req.key,
            needed=self._needed(needed),
            targets=plan.targets + plan.pending,
            value=after,
            trace=trace,
            progress=WriteProgress(acks=set()),
        )
        # Sent after the sync: a crash before it would make this actor count the key's entry
        # again from its older copy, and the replicas' entry (merged by maximum) would hide that.
        return self._replicate(now, op, ks, counter, plan, wait_for_sync=True)

    def _needed(self, needed: int) -> int:
        if "ack_before_quorum" in self.config.bugs:
            return 1  # planted bug: acknowledge on the coordinator's copy alone
        return needed

    def settle_forward(self, now: float, req: PutRequest, home: str | None, outcome: str) -> list[Effect]:
        """What became of a put this node forwarded under an exact dot it minted (exact_dots.py).
        `outcome`: "stored" (a coordinator stored it under the dot), "void" (none did, and none
        will: the dot is stored as a void), "unknown" (a coordinator that went silent may have: the
        put itself is left, to take effect later). A void or the put waits as a hint for `home`, a
        home replica of the key (None: none known; the gap stays, and the node's next life starts
        a new actor for the key). A node leaving the ring keeps no new hint (it may have handed its
        hints over already): it sends the record to `home` once, as it stands."""
        assert req.dot is not None
        if outcome == "stored":
            self.exact.settle(req.keyspace, req.key)
            return []
        ks = self.replica.keyspaces.get(req.keyspace)
        if home is None or ks is None:
            return []
        void = outcome == "void"
        sibling = Sibling(
            req.dot,
            {} if void else compact(dict(req.context or {})),
            None if void else req.value,
            VOID if void else (req.ctype if req.value is not None else ""),
            req.ts,
        )
        record = Versioned((sibling,))
        out: list[Effect] = []
        if self.replica.ring_view.status in ("leaving", "left"):
            out.append(Send(home, ReplicaWrite(0, ks, req.key, record)))  # no op: the ack is dropped
        elif not self.replica.hints.add(now, home, req.keyspace, req.key, record):
            return []
        if void:
            self.metrics.exact_dots_voided += 1
        else:
            self.metrics.exact_dots_left_as_hints += 1
        self.exact.settle(req.keyspace, req.key)
        return out

    def _fresh_actor(self) -> str:
        return f"{self.node_id}~{next_epoch(self.store)}"

    @property
    def home_actor(self) -> str:
        return self.lease.actor

    def adopt_actor(self, actor: str) -> None:
        """Write as `actor` from now on (the caller persisted it as meta `actor`)."""
        self.lease.adopt(actor)

    def _refuse_future(
        self, keyspace: str, key: str, siblings: tuple[Sibling, ...], context: VersionVector
    ) -> None:
        """Refuse a context that claims more of this node's own actor than it ever issued.

        Every counter this actor issued, for any key, is at most the lease's high-water mark of
        issued counters (dot_lease.py), and a record only ever holds counters the actor issued, so
        a claim above both is forged (or made up). Only the actor's own node can prove that;
        claims about other actors are made harmless by `_dot` instead.
        """
        claimed = context.get(self.home_actor, 0)
        if not claimed:
            return
        issued = max(self.lease.issued, next_dot(siblings, self.home_actor, {})[1] - 1)
        if claimed > issued:
            raise BadInput(
                f"context from the future: it claims {self.home_actor}:{claimed} for {keyspace}/{key}, "
                f"but {self.home_actor} has issued at most {self.home_actor}:{issued} "
                "(use the context a get returned)"
            )

    def _dot(
        self, siblings: tuple[Sibling, ...], actor: str, context: VersionVector
    ) -> tuple[Dot, DotLeaseSaved | None]:
        """A fresh dot for `actor` (or for a new actor), never above 2^53-1, and the lease's
        effect to send durable if the dot made it persist a new mark.

        The home actor's counter comes from the lease, one sequence for every key, so it never
        repeats (dot_lease.py); it is also above everything the record and the context claim for
        the actor. A forged claim of another node's actor (B:2^53-1, sent to A, which cannot prove
        it forged) reaches B's record through replication and would push B's next dot out of range:
        the key would be locked for B forever. Instead B takes a new actor id (`B~epoch`, from the
        same sequence as fallback actors, so never used before) and keeps it as its home actor for
        every key from then on: a new id per write would bloat contexts past their pruning limit.
        The claim is harmless otherwise: it covers only dots of the old id. Fallback actors are new
        for every write and need no lease.
        """
        while True:
            counter = next_dot(siblings, actor, context)[1]
            if actor == self.home_actor:
                counter = self.lease.next_counter(counter)
            if counter <= MAX_INTEGER:
                break
            fresh = self._fresh_actor()
            if actor == self.home_actor:
                self.store.put_meta("actor", fresh)  # Node reads it at boot
                self.lease.adopt(fresh)
            actor = fresh
        saved = self.lease.take(counter) if actor == self.home_actor else None
        return (actor, counter), saved

    def _replicate(
        self, now: float, op: PendingWrite, ks: KeyspaceDef, record: Record, plan: Plan, wait_for_sync: bool
    ) -> list[Effect]:
        hint_for = plan.hint_for.get(self.node_id)
        if not self.replica.store_local(now, ks.name, op.key, record, hint_for):
            failure = Failure("unavailable", f"{self.node_id} cannot take another hint for {hint_for}")
            return [finish(now, op, failure, stored=False)]
        for pending in plan.pending_down:
            # The future replica would miss this write: its stream may already have been built.
            # A full queue does not fail the write: the W + P acks it needs put it on W replicas
            # of the future ring without the hint, which only spares anti-entropy the work.
            stored = self.replica.store_local(now, ks.name, op.key, record, pending)
            if op.trace is not None:
                kept = "kept" if stored else "could not keep"
                op.trace.note(now, f"{kept} a hint for {pending} (pending, down)")
        op_id = self.pending.add(op)
        out: list[Effect] = []
        for target in op.targets:
            if target != self.node_id:
                hint = plan.hint_for.get(target)
                write = ReplicaWrite(op_id, ks, op.key, record, hint)
                out.append(Send(target, write, durable=wait_for_sync))
                if op.trace is not None:
                    op.trace.note(now, f"sent to {target}" + (f" (hint for {hint})" if hint else ""))
        # The coordinator's own copy counts once it is synced, as a replica's does: it acknowledges
        # to itself after the sync. So every ack counted is durable and the answer need not wait
        # for a sync of its own (which would put a second fsync on the write's path).
        out.append(Send(self.node_id, ReplicaAck(op_id), durable=True))
        out.extend(self._check(now, op_id, op))
        return out

    def on_ack(self, now: float, src: str, msg: ReplicaAck, op: PendingWrite) -> list[Effect]:
        progress = op.progress
        if msg.ok:
            progress.acks.add(src)
            if op.trace is not None:
                op.trace.note(now, f"ack from {src}")
        else:
            progress.failed[src] = msg.error
            if op.trace is not None:
                op.trace.note(now, f"{src} refused: {msg.error}")
        return self._check(now, msg.op, op)

    def _check(self, now: float, op_id: int, op: PendingWrite) -> list[Effect]:
        out: list[Effect] = []
        progress = op.progress
        if not progress.answered:
            if len(progress.acks) >= op.needed:
                progress.answered = True
                out.append(finish(now, op, self._result(op)))
            elif len(op.targets) - len(progress.failed) < op.needed:
                progress.answered = True
                reasons = "; ".join(progress.failed.values())
                failure = Failure(
                    "refused",
                    f"{len(progress.acks)} of {len(op.targets)} replicas stored the write, {op.level} "
                    f"needs {op.needed}: {reasons}",
                    answered=len(progress.acks),
                    needed=op.needed,
                    coordinator=self.node_id,
                )
                out.append(finish(now, op, failure))
        if len(progress.acks) + len(progress.failed) >= len(op.targets):
            self.pending.discard(op_id)
        return out

    def _result(self, op: PendingWrite) -> PutResult | IncrResult:
        acks = len(op.progress.acks)  # `finish` adds the trace
        if isinstance(op, PendingIncr):
            return IncrResult(self.node_id, op.value, acks, op.needed)
        return PutResult(self.node_id, acks, op.needed, op.warnings, op.hinted)

    def expire(self, now: float, op: PendingWrite) -> list[Effect]:
        """The write's deadline passed: hint it for the home replicas that never answered, and
        fail it if the client is still waiting."""
        self._hint_the_silent(now, op)
        progress = op.progress
        if progress.answered:
            return []
        progress.answered = True
        got = len(progress.acks)
        ms = (now - op.started) * 1000.0
        failure = Failure(
            "timeout",
            f"timed out after {ms:.0f} ms: {got} of {len(op.targets)} replicas answered, "
            f"{op.level} needs {op.needed}; the write is not undone: the replicas that took it keep it",
            answered=got,
            needed=op.needed,
            coordinator=self.node_id,
        )
        return [finish(now, op, failure)]

    def _hint_the_silent(self, now: float, op: PendingWrite) -> None:
        """A home replica that neither stored nor refused the write by its deadline (cut off before
        anyone saw it down, so no fallback stood in for it) gets this node's copy of the key as a
        hint, handed off once it answers again (handoff.py). Without it only anti-entropy's round
        would bring it the write, and a round of a few hundred comparisons at one per repair
        interval took minutes after a short partition healed (found by `bhandar bench repair`).
        A silent fallback gets none: the home it stood in for is down, and its own copy is not
        one the fallback should keep."""
        progress = op.progress
        silent = [
            t for t in op.targets if t != self.node_id and t not in progress.acks and t not in progress.failed
        ]
        ks = self.replica.keyspaces.get(op.keyspace)
        ring = self.replica.ring_view.ring
        if not silent or ks is None or not ring.nodes:
            return  # (most writes: every target answered, and the key is not hashed again)
        home = ring.preference_list(key_token(op.keyspace, op.key), ks.n)
        silent = [t for t in silent if t in home]
        record = self.replica.local_view(op.keyspace, op.key)
        if record is None:
            return
        for target in silent:
            if self.replica.hints.add(now, target, op.keyspace, op.key, record):
                self.metrics.hints_for_silent += 1
            else:
                self.metrics.hints_refused += 1


# The dot of a write not minted yet, while the write path checks what could still refuse it: no
# record holds it, so the merge's count of siblings is the one the minted dot will give.
_UNMINTED: Dot = ("", 0)


def _merge(ks: KeyspaceDef, siblings: tuple[Sibling, ...], sibling: Sibling) -> tuple[Sibling, ...]:
    if ks.policy == "lww":
        return lww_merge(siblings, (sibling,))
    return merge_siblings(siblings, (sibling,))
