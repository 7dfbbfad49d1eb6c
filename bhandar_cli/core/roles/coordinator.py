"""The coordinator role: every client request, local or forwarded, enters here.

It validates the request, plans its replicas, and either coordinates it (read_path.py, write_path.py),
forwards it to the node that should (a replica: the first live home replica, or a fallback when
none is up; a put whose coordinator does not answer in time falls back to the next), or hands a
command to its role: `repair` to anti-entropy, `decommission` to streaming. Keyspace definitions
are created here and broadcast to every peer.
"""

from __future__ import annotations

from bhandar_cli.core.membership import key_token
from bhandar_cli.core.model import (
    JSON,
    LEVELS,
    NOT_APPLIED,
    BadInput,
    BhandarError,
    KeyspaceDef,
    NodeConfig,
    Unavailable,
    check_context,
    check_delta,
    check_exact_dot,
    check_json_value,
    check_key,
    check_request_id,
    check_value_size,
    one_of,
)
from bhandar_cli.core.protocol import (
    ClientReply,
    ClientRequest,
    DecommissionRequest,
    Effect,
    Failure,
    GetRequest,
    IncrRequest,
    IncrResult,
    KeyspaceRequest,
    KeyspaceResult,
    PendingForward,
    PutRequest,
    PutResult,
    RepairRequest,
    Respond,
    SchemaUpdate,
    Send,
    Trace,
    answer,
    refuse,
    replaced,
)
from bhandar_cli.core.repair import AntiEntropy
from bhandar_cli.core.roles.hot_keys import HotKeys
from bhandar_cli.core.roles.quorum import Plan, plan_replicas, unavailable, write_quorum
from bhandar_cli.core.roles.read_path import ReadCoordinator
from bhandar_cli.core.roles.role_context import RoleContext
from bhandar_cli.core.roles.streaming import Streaming
from bhandar_cli.core.roles.write_path import WriteCoordinator

MAX_HOPS = 2
TOKEN_CACHE = 1 << 16  # ring positions of recently used keys kept, at most


class Coordinator:
    """Entry point of client requests: validation, the choice of coordinator, forwarding."""

    def __init__(
        self,
        context: RoleContext,
        config: NodeConfig,
        reads: ReadCoordinator,
        writes: WriteCoordinator,
        anti_entropy: AntiEntropy,
        streaming: Streaming,
    ) -> None:
        self.node_id = context.node_id
        self.config = config
        self.keyspaces = context.keyspaces
        self.ring_view = context.ring_view
        self.pending = context.pending
        self.metrics = context.metrics
        self.reads = reads
        self.writes = writes
        self.anti_entropy = anti_entropy
        self.streaming = streaming
        # (forwarding node, its op id) -> when to forget it. A request the network duplicated
        # would otherwise be coordinated twice: twice the work, and (from a forwarder speaking
        # protocol 3, which mints no exact dot) a put stored as two siblings with the same value.
        self._recent_forwards: dict[tuple[str, int], float] = {}
        self._tokens: dict[tuple[str, str], int] = {}
        # Client request rates per key (the `hot` view): counted where a client's request enters
        # the cluster, so a forwarded request is counted once.
        self.hot = HotKeys()

    def request(self, now: float, req: ClientRequest, origin: str | None) -> list[Effect]:
        """A client request: from a local client (`origin` None) or forwarded by node `origin`."""
        if origin is not None and self._seen_forward(now, origin, req.rid):
            return []  # the network delivered this forwarded request twice; the first is handled
        if origin is None and isinstance(req, PutRequest) and req.dot is not None:
            failure = Failure(
                "bad_input", "a client cannot choose a write's dot (only a forwarding node does)"
            )
            return [answer(req.rid, None, failure)]
        try:
            if isinstance(req, KeyspaceRequest):
                return self._create_keyspace(req, origin)
            if isinstance(req, RepairRequest):
                return self.anti_entropy.repair_now(now, req.rid, origin, req.keyspace)
            if isinstance(req, DecommissionRequest):
                return self.streaming.decommission(now, req.rid, origin)
            ks = self._keyspace_for(req)
            self._validate(req, ks)
            if origin is None:
                self.hot.record(now, ks.name, req.key)
            plan = self._plan(ks, req.key, now)
            if isinstance(req, GetRequest):
                return self.reads.get(now, req, origin, ks, plan)
            needed = write_quorum(plan, req.consistency, ks.n)
            if len(plan.targets) + len(plan.pending) < needed:
                failure = unavailable(self.node_id, ks, plan, req.consistency, write=True)
                return [refuse(req, origin, failure)]
            avoid = req.avoid if isinstance(req, PutRequest) else ()
            return self._route(now, req, origin, ks, plan, needed, avoid, None)
        except BhandarError as exc:
            return [refuse(req, origin, Failure(exc.code, str(exc), coordinator=self.node_id))]

    def on_forward_reply(self, now: float, src: str, msg: ClientReply) -> list[Effect]:
        """The answer of a coordinator this node forwarded a request to: relay it."""
        op = self.pending.get(msg.rid)
        if not isinstance(op, PendingForward):
            return []
        self.pending.discard(msg.rid)
        result = msg.result
        stored, left = self._dot_outcome(now, op, msg)
        if op.trace is not None and isinstance(result, PutResult | IncrResult | Failure):
            # The coordinator's steps count from when it got the request: about when we sent it.
            offset = round((op.sent - op.trace.started) * 1000.0, 3)
            steps = (*op.trace.steps, *((round(ms + offset, 3), text) for ms, text in result.trace))
            result = replaced(result, trace=steps)
        if isinstance(result, Failure) and len(op.tried) > 1:
            result = _outcome_unknown(result, op.tried[:-1])
        if isinstance(result, PutResult | IncrResult) and op.why:
            # The outermost forwarder relays last: the reason the client reads is its own.
            result = replaced(result, forward_reason=op.why)
        return [answer(op.rid, op.origin, result, stored=stored), *left]

    def _dot_outcome(
        self, now: float, op: PendingForward, msg: ClientReply
    ) -> tuple[bool | None, list[Effect]]:
        """For a put forwarded under an exact dot: settle the dot if this node minted it
        (exact_dots.py), and say what the reply tells the node this one answers (`ClientReply`)."""
        req = op.request
        if not isinstance(req, PutRequest) or req.dot is None:
            return None, []
        first = len(op.tried) == 1  # no earlier coordinator went silent on it
        stored = msg.stored
        if stored is None and isinstance(msg.result, PutResult):
            stored = False  # an older coordinator: it applied the put under a dot of its own
        if stored is None and isinstance(msg.result, Failure) and msg.result.code in NOT_APPLIED:
            stored = False
        if stored:
            return True, self._settle(now, req, "stored")
        if stored is False and first:
            return False, self._settle(now, req, "void")
        return None, self._settle(now, req, "unknown")

    def _settle(self, now: float, req: ClientRequest, outcome: str) -> list[Effect]:
        """Tell the write path what became of a put forwarded under an exact dot, if this node
        minted it (`WriteCoordinator.settle_forward`)."""
        if isinstance(req, PutRequest) and req.dot is not None and self.writes.exact.mine(req.dot):
            return self.writes.settle_forward(now, req, self._home_of(req, now), outcome)
        return []

    def _home_of(self, req: PutRequest, now: float) -> str | None:
        """A home replica of `req`'s key that is up (else any), to hold what a forward left."""
        ks = self.keyspaces.get(req.keyspace)
        if ks is None:
            return None
        try:
            plan = self._plan(ks, req.key, now)
        except BhandarError:
            return None
        others = [h for h in plan.home if h != self.node_id]
        up = [h for h in others if h in plan.targets]
        return (up or others)[0] if others else None

    def expire_forward(self, now: float, op: PendingForward) -> list[Effect]:
        """`op.target` did not answer in time: fall back to another coordinator, or fail.

        A put is handed to the next live replica, or coordinated here, while a quorum is reachable
        without the coordinators already tried. The first may be slow rather than gone and apply
        the put too; that is safe because the put carries the exact dot its forwarder minted
        (exact_dots.py) and every coordinator applies it under that dot: the two copies are one
        write, and a context that saw either covers both. (A node speaking protocol 3 ignores the
        dot and mints its own: two siblings with the same value, as after a client's retry.) An
        increment has no such safety: a second coordinator counts it under its own actor, so it
        would count twice. Nothing proves a silent coordinator did not apply it (the request may
        have arrived), so an increment is never retried elsewhere.
        """
        req = op.request
        waited = (now - op.sent) * 1000.0
        trace = op.trace
        if trace is not None:
            trace.note(now, f"{op.target} did not answer within {waited:.0f} ms")
        if isinstance(req, IncrRequest):
            return self._fail(
                op,
                f"forwarded to {op.target}, which did not answer in time: the outcome is unknown (the "
                "increment may have been counted; it is not retried elsewhere, where it could count twice)",
                now,
            )
        ks = self.keyspaces.get(req.keyspace)
        if ks is None:  # validated before it was forwarded; a definition is never forgotten
            return self._fail(op, f"forwarded to {op.target}, which did not answer in time", now)
        try:
            plan = self._plan(ks, req.key, now)
        except BhandarError as exc:
            return self._fail(op, f"forwarded to {op.target}, which did not answer in time; {exc}", now)
        needed = write_quorum(plan, req.consistency, ks.n)
        reachable = [t for t in plan.targets if t not in op.tried]
        if len(reachable) + len(plan.pending) < needed:
            return self._fail(
                op,
                f"forwarded to {', '.join(op.tried)}, which did not answer in time; without "
                f"{'it' if len(op.tried) == 1 else 'them'} {len(reachable)} replicas are reachable, "
                f"{req.consistency} needs {needed}",
                now,
            )
        self.metrics.forward_fallbacks += 1
        if trace is not None:
            trace.note(now, f"{self.node_id} falls back: a coordinator other than {', '.join(op.tried)}")
        try:
            effects = self._route(now, req, op.origin, ks, plan, needed, op.tried, trace)
        except BhandarError as exc:
            return self._fail(op, f"forwarded to {op.target}, which did not answer in time; {exc}", now)
        # Refused here at once (no coordinator agreed on, a sibling limit...): as a reply from the
        # next coordinator would be, it is no proof that the first did not apply the put.
        refusals = [_answers_with_failure(e, op) for e in effects]
        pairs = zip(effects, refusals, strict=True)
        out = [_outcome_unknown_answer(e, op) if refused else e for e, refused in pairs]
        if any(refusals):  # not stored here, and the first coordinators may have applied it
            out += self._settle(now, op.request, "unknown")
        return out

    def _fail(self, op: PendingForward, error: str, now: float) -> list[Effect]:
        """Give up on a forward whose coordinators did not answer: the outcome is unknown. A put
        under an exact dot this node minted is left as a hint (exact_dots.py)."""
        steps = tuple(op.trace.steps) if op.trace is not None else ()
        failure = Failure("timeout", error, coordinator=self.node_id, trace=steps)
        return [answer(op.request.rid, op.origin, failure), *self._settle(now, op.request, "unknown")]

    def on_schema(self, now: float, src: str, msg: SchemaUpdate) -> list[Effect]:
        self.keyspaces.learn_all(msg.keyspaces, msg.seals)
        return []

    def _seen_forward(self, now: float, origin: str, rid: int) -> bool:
        recent = self._recent_forwards
        while recent:  # entries are in expiry order: the window is the same for all
            oldest = next(iter(recent))
            if recent[oldest] > now:
                break
            del recent[oldest]
        if (origin, rid) in recent:
            return True
        # The forwarder stops waiting after twice the request timeout; later copies are harmless.
        recent[(origin, rid)] = now + self.config.request_timeout * 2
        return False

    def _keyspace_for(self, req: PutRequest | GetRequest | IncrRequest) -> KeyspaceDef:
        ks = self.keyspaces.get(req.keyspace)
        if ks is not None:
            return ks
        if self.ring_view.status == "joining":
            # A joining node may not have heard the cluster's keyspaces yet: the keyspace may well
            # exist, so this is the node's state, not the caller's mistake.
            raise Unavailable(
                f"{self.node_id} is joining and does not know keyspace {req.keyspace} yet; retry"
            )
        # A node that has not heard of a keyspace created elsewhere says so too: the schema
        # broadcast or gossip brings it soon, and the client retries.
        return self.keyspaces.require(req.keyspace)

    def _validate(self, req: PutRequest | GetRequest | IncrRequest, ks: KeyspaceDef) -> None:
        """The limits of core/model/limits.py, checked again here: raw frames reach the core unchecked."""
        if req.consistency not in LEVELS:
            raise BadInput(f"unknown consistency level {req.consistency!r} (use {one_of(LEVELS)})")
        check_key(req.key, self.config.max_key_bytes)
        if isinstance(req, PutRequest):
            if ks.policy == "counter":
                raise BadInput(f"keyspace {ks.name} holds counters: use incr, not put or delete")
            if req.value is not None:
                check_value_size(req.value, self.config.max_value_bytes)
                if req.ctype == JSON:
                    check_json_value(req.value)
            if req.context:
                check_context(req.context)
            if req.dot is not None:
                check_exact_dot(req.dot)
        if isinstance(req, IncrRequest):
            if ks.policy != "counter":
                raise BadInput(f"keyspace {ks.name} has policy {ks.policy}: incr needs a counter keyspace")
            check_delta(req.delta)
            check_request_id(req.request_id)

    def _plan(self, ks: KeyspaceDef, key: str, now: float) -> Plan:
        view = self.ring_view
        token = self._tokens.get((ks.name, key))
        if token is None:
            if len(self._tokens) >= TOKEN_CACHE:
                self._tokens.clear()  # a bound on memory; hashing again is cheap
            token = self._tokens[(ks.name, key)] = key_token(ks.name, key)
        ring = view.ring
        if not ring.nodes:
            # A joining node that has not heard from anyone yet (it knows only seed addresses).
            # Found by `bhandar chaos --seed 8 --ops 1500 --faults all --storage lsm`.
            raise Unavailable(f"{self.node_id} has not found the cluster yet (no member known); retry")
        liveness = view.liveness
        return plan_replicas(
            ring, token, ks.n, ks.quorum, lambda n: liveness.is_up(n, now), view.pending_ring()
        )

    def _route(
        self,
        now: float,
        req: PutRequest | IncrRequest,
        origin: str | None,
        ks: KeyspaceDef,
        plan: Plan,
        needed: int,
        avoid: tuple[str, ...],
        trace: Trace | None,
    ) -> list[Effect]:
        """Coordinate the write here or forward it to the replica that should, never to `avoid`
        (coordinators that did not answer it in time)."""
        me = self.node_id
        candidates = tuple(t for t in plan.targets if t not in avoid)
        if not candidates:
            raise Unavailable(f"no replica other than {', '.join(avoid)} is reachable")
        # A fallback coordinates only when no home replica is up: a home replica's record is the
        # one every replica's copy converges on. (Found by `bhandar chaos --seed 2138 --ops 5000
        # --faults all`, when each write a fallback coordinated took a new actor and contexts
        # were pruned.)
        where = f"{req.keyspace}/{req.key}"
        # Why this node does not coordinate, in the reply (`forward_reason`): the client asked it.
        after = f" ({', '.join(avoid)} did not answer in time)" if avoid else ""
        if me not in candidates or (me not in plan.home and candidates[0] in plan.home):
            if me in avoid or (me in plan.home and me not in candidates):
                why = f"{me} did not coordinate the write to {where}{after}: it forwarded to {candidates[0]}"
            elif me in plan.targets:
                why = (
                    f"{me} stands in for a down replica of {where} and its home replica "
                    f"{candidates[0]} is up: it forwarded to {candidates[0]}{after}"
                )
            else:
                why = (
                    f"{me} is not a replica of {where} ({', '.join(plan.home)}): it forwarded to "
                    f"{candidates[0]}{after}"
                )
            return self._forward(now, req, origin, candidates[0], avoid, trace, why)
        if self.ring_view.status in ("leaving", "left"):
            # A leaving node has streamed (or is about to stream) its data away: a write it
            # coordinated could rest on its own copy alone and leave with it. Another replica
            # coordinates. Found by `bhandar chaos --seed 105 --ops 3000` (LSM storage).
            others = tuple(t for t in candidates if t != me)
            if not others:
                raise Unavailable(f"{me} is leaving the ring and no other replica is reachable")
            why = f"{me} is a replica of {where} but is leaving the ring: it forwarded to {others[0]}{after}"
            return self._forward(now, req, origin, others[0], avoid, trace, why)
        self.metrics.coordinated += 1
        if isinstance(req, IncrRequest):
            return self.writes.incr(now, req, origin, ks, plan, needed)  # never a fallback
        return self.writes.put(now, req, origin, ks, plan, needed, trace)

    def _forward(
        self,
        now: float,
        req: PutRequest | IncrRequest,
        origin: str | None,
        target: str,
        avoid: tuple[str, ...],
        trace: Trace | None,
        why: str,
    ) -> list[Effect]:
        if req.hops >= MAX_HOPS:
            failure = Failure("unavailable", "could not agree on a coordinator (ring views differ); retry")
            if trace is not None:
                failure = replaced(failure, trace=tuple(trace.steps))
            return [answer(req.rid, origin, failure)]
        if trace is None and req.trace:
            trace = Trace(now)
        minted = isinstance(req, PutRequest) and req.dot is None and self.config.exact_dots
        if minted:
            assert isinstance(req, PutRequest)
            # One dot for the put, whichever coordinator applies it (exact_dots.py); saved before
            # it leaves (the Send is durable).
            req = replaced(req, dot=self.writes.exact.mint(req.keyspace, req.key, req.context or {}), ts=now)
        if trace is not None:
            dot = f" as {req.dot[0]}:{req.dot[1]}" if isinstance(req, PutRequest) and req.dot else ""
            trace.note(now, f"{self.node_id} forwards to {target}{dot}")
        forward = PendingForward(
            rid=req.rid,
            origin=origin,
            deadline=now + self.config.request_timeout * 2,
            target=target,
            request=req,
            tried=(*avoid, target),
            sent=now,
            trace=trace,
            why=why,
        )
        op_id = self.pending.add(forward)
        self.metrics.forwarded += 1
        msg = replaced(req, rid=op_id, hops=req.hops + 1)
        if isinstance(msg, PutRequest):
            msg = replaced(msg, avoid=avoid)
        return [Send(target, msg, durable=minted)]

    def _create_keyspace(self, req: KeyspaceRequest, origin: str | None) -> list[Effect]:
        created = self.keyspaces.create(req.definition)
        return [
            *self._broadcast_schema(),
            answer(req.rid, origin, KeyspaceResult(req.definition, created), durable=True),
        ]

    def _broadcast_schema(self) -> list[Effect]:
        update = SchemaUpdate(self.keyspaces.all(), self.keyspaces.seals())
        return [Send(peer, update) for peer in self.ring_view.peers()]


def _outcome_unknown(failure: Failure, tried: tuple[str, ...]) -> Failure:
    """A put's failure after its first coordinators (`tried`) did not answer in time. They may
    have applied it, so a failure that says "not applied" (unavailable, refused input) is not
    the put's outcome: it becomes a timeout, an outcome unknown, and says both."""
    if failure.code not in NOT_APPLIED:
        return failure
    return replaced(
        failure,
        code="timeout",
        error=(
            f"forwarded to {', '.join(tried)}, which did not answer in time: the outcome is unknown "
            f"(the put may have been applied there); then: {failure.error}"
        ),
    )


def _answers_with_failure(effect: Effect, op: PendingForward) -> bool:
    """Whether `effect` answers `op`'s client with a failure."""
    if op.origin is None:
        return isinstance(effect, Respond) and effect.rid == op.rid and isinstance(effect.result, Failure)
    if not isinstance(effect, Send) or effect.dst != op.origin:
        return False
    msg = effect.msg
    return isinstance(msg, ClientReply) and msg.rid == op.rid and isinstance(msg.result, Failure)


def _outcome_unknown_answer(effect: Effect, op: PendingForward) -> Effect:
    """`effect`, which answers `op`'s client with a failure (`_answers_with_failure`), with that
    failure as an unknown outcome (a put that carried an exact dot: not known stored either)."""
    if isinstance(effect, Respond) and isinstance(effect.result, Failure):
        return replaced(effect, result=_outcome_unknown(effect.result, op.tried))
    assert isinstance(effect, Send) and isinstance(effect.msg, ClientReply)
    msg = effect.msg
    assert isinstance(msg.result, Failure)
    return replaced(effect, msg=replaced(msg, result=_outcome_unknown(msg.result, op.tried), stored=None))
