"""Client requests at a node: validating them, choosing who coordinates (forwarding once when it
is not this node), keyspace definitions, and the `repair` and `decommission` commands."""

from __future__ import annotations

from dataclasses import replace

from bhandar_cli.core.antientropy import RepairBatch
from bhandar_cli.core.config import LEVELS, KeyspaceDef, one_of, required
from bhandar_cli.core.errors import BadInput, BhandarError, Refused, TooLarge, Unavailable
from bhandar_cli.core.messages import (
    ClientReply,
    ClientRequest,
    DecommissionRequest,
    Effect,
    Failure,
    GetRequest,
    IncrRequest,
    KeyspaceRequest,
    KeyspaceResult,
    MoveResult,
    Note,
    PutRequest,
    RepairRequest,
    RepairResult,
    SchemaUpdate,
    Send,
)
from bhandar_cli.core.node_base import NodeBase
from bhandar_cli.core.quorum import Op, Plan, plan_replicas
from bhandar_cli.core.ring import key_token
from bhandar_cli.core.streaming import Movement

MAX_HOPS = 2


class RequestRole(NodeBase):
    """The entry point of every client request, local or forwarded."""

    _recent_forwards: dict[tuple[str, int], float]
    _tokens: dict[tuple[str, str], int]
    movement: Movement | None
    repair_batches: dict[int, RepairBatch]

    def _client(self, now: float, req: ClientRequest, origin: str | None) -> list[Effect]:
        if origin is not None and self._seen_forward(now, origin, req.rid):
            return []  # the network delivered this forwarded request twice; the first is handled
        try:
            if isinstance(req, KeyspaceRequest):
                return self._create_keyspace(req, origin)
            if isinstance(req, RepairRequest):
                return self._repair_now(now, req, origin)
            if isinstance(req, DecommissionRequest):
                return self._decommission(now, req, origin)
            ks, out = self._keyspace_for(req)
            self._validate(req, ks)
            plan = self._plan(ks, req.key, now)
            if isinstance(req, GetRequest):
                return out + self._coordinate_get(now, req, origin, ks, plan)
            needed = required(req.consistency, ks.n) + len(plan.pending)
            if len(plan.targets) + len(plan.pending) < needed:
                return [*out, self._answer(req.rid, origin, self._unavailable(ks, plan, req.consistency))]
            # A fallback coordinates only when no home replica is up: each write it coordinates
            # mints a new actor, and contexts bloated with them get pruned, which can bring
            # superseded siblings back. Found by `bhandar chaos --seed 2138 --ops 5000 --faults all`.
            if self.id not in plan.targets or (self.id not in plan.home and plan.targets[0] in plan.home):
                return out + self._forward(now, req, origin, plan)
            if self.gossip is not None and self.gossip.membership.mine.status in ("leaving", "left"):
                # A leaving node has streamed (or is about to stream) its data away: a write it
                # coordinated could rest on its own copy alone and leave with it. Another replica
                # coordinates. Found by `bhandar chaos --seed 105 --ops 3000` (LSM storage).
                others = tuple(t for t in plan.targets if t != self.id)
                if not others:
                    raise Unavailable(f"{self.id} is leaving the ring and no other replica is reachable")
                return out + self._forward(now, req, origin, replace(plan, targets=others))
            self.metrics.coordinated += 1
            if isinstance(req, IncrRequest):
                return out + self._coordinate_incr(now, req, origin, ks, plan, needed)
            return out + self._coordinate_put(now, req, origin, ks, plan, needed)
        except BhandarError as exc:
            return [self._answer(req.rid, origin, Failure(exc.code, str(exc), coordinator=self.id))]

    def _repair_now(self, now: float, req: RepairRequest, origin: str | None) -> list[Effect]:
        batch_id = self._next_op
        self._next_op += 1
        batch = RepairBatch(req.rid, origin)
        self.repair_batches[batch_id] = batch
        out: list[Effect] = []
        skipped: dict[str, int] = {}
        for ks, lo, hi, peers in self.replicated_ranges():
            if req.keyspace is not None and ks.name != req.keyspace:
                continue
            for peer in peers:
                if self.is_up(peer, now):
                    session = self._next_op
                    out.extend(self.start_repair(now, ks, lo, hi, peer, batch_id))
                    batch.pending.add(session)
                else:
                    skipped[peer] = skipped.get(peer, 0) + 1
        batch.failed.extend(
            f"{peer} is down: {n} range comparisons skipped" for peer, n in sorted(skipped.items())
        )
        if not batch.pending:
            out.extend(self._finish_batch(batch_id, batch))
        return out

    def _finish_batch(self, batch_id: int, batch: RepairBatch) -> list[Effect]:
        self.repair_batches.pop(batch_id, None)
        result = RepairResult(self.id, batch.ranges, batch.differing, batch.keys, tuple(batch.failed))
        return [self._answer(batch.rid, batch.origin, result, durable=True)]

    def _decommission(self, now: float, req: DecommissionRequest, origin: str | None) -> list[Effect]:
        gossip = self.gossip
        if gossip is None:
            raise BadInput("decommission needs gossip membership (liveness=gossip)")
        status = gossip.membership.mine.status
        if status != "normal":
            raise BadInput(f"{self.id} is {status}; only a normal node can be decommissioned")
        remaining = [m for m in gossip.membership.peers() if gossip.membership.status_of(m) == "normal"]
        widest = max(ks.n for ks in self.keyspaces.values())
        if len(remaining) < widest:
            raise Refused(
                f"decommissioning {self.id} would leave {len(remaining)} nodes for a keyspace with n={widest}"
            )
        gossip.set_status("leaving")
        self.store.put_meta("status", "leaving")
        self.movement = Movement("leave", now + self.config.join_delay, req.rid, origin)
        return [Note(f"{self.id} is leaving: its ranges will stream to their new replicas")]

    def _movement_answer(self, mv: Movement, keys: int) -> list[Effect]:
        self.store.put_meta("status", "left")
        if not mv.rid:
            return []
        return [self._answer(mv.rid, mv.origin, MoveResult(self.id, "leave", keys), durable=True)]

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

    def _keyspace_for(self, req: PutRequest | GetRequest | IncrRequest) -> tuple[KeyspaceDef, list[Effect]]:
        ks = self.keyspaces.get(req.keyspace)
        if ks is not None:
            return ks, []
        if self.gossip is not None and self.gossip.membership.mine.status == "joining":
            # A joining node may not have heard the cluster's keyspaces yet: creating this one
            # with the defaults would serve a strict keyspace as sloppy (or a counter keyspace as
            # siblings). Found by `bhandar chaos --seed 38 --ops 3000 --faults all`.
            raise Unavailable(f"{self.id} is joining and does not know keyspace {req.keyspace} yet; retry")
        # Using a new keyspace name creates it with the default policy, everywhere.
        ks = self._implicit(req.keyspace)
        self._learn(ks)
        return ks, self._broadcast_schema()

    def _validate(self, req: PutRequest | GetRequest | IncrRequest, ks: KeyspaceDef) -> None:
        if req.consistency not in LEVELS:
            raise BadInput(f"unknown consistency level {req.consistency!r} (use {one_of(LEVELS)})")
        size = len(req.key.encode("utf-8", "surrogatepass"))
        if not 0 < size <= self.config.max_key_bytes:
            raise BadInput(f"key must be 1 to {self.config.max_key_bytes} bytes (got {size})")
        if isinstance(req, PutRequest):
            if ks.policy == "counter":
                raise BadInput(f"keyspace {ks.name} holds counters: use incr, not put or delete")
            if req.value is not None and len(req.value) > self.config.max_value_bytes:
                raise TooLarge(
                    f"value of {len(req.value)} bytes is over the limit of {self.config.max_value_bytes}"
                )
        if isinstance(req, IncrRequest) and ks.policy != "counter":
            raise BadInput(f"keyspace {ks.name} has policy {ks.policy}: incr needs a counter keyspace")

    def _plan(self, ks: KeyspaceDef, key: str, now: float) -> Plan:
        liveness = self.liveness
        token = self._tokens.get((ks.name, key))
        if token is None:
            if len(self._tokens) >= 1 << 16:
                self._tokens.clear()  # a bound on memory; hashing again is cheap
            token = self._tokens[(ks.name, key)] = key_token(ks.name, key)
        gossip = self.gossip
        future = (
            gossip.membership.ring("future") if gossip is not None and gossip.membership.moving() else None
        )
        return plan_replicas(self.ring, token, ks.n, ks.quorum, lambda n: liveness.is_up(n, now), future)

    def _unavailable(self, ks: KeyspaceDef, plan: Plan, level: str) -> Failure:
        needed = required(level, ks.n)
        reachable = len(plan.targets)
        down = ", ".join(plan.down) or "none"
        mode = "strict quorum: only home replicas count" if ks.quorum == "strict" else "no healthy fallback"
        return Failure(
            "unavailable",
            f"{reachable} of {ks.n} replicas reachable, {level} needs {needed} "
            f"(home replicas down: {down}; {mode})",
            answered=reachable,
            needed=needed,
            coordinator=self.id,
        )

    def _forward(
        self, now: float, req: PutRequest | IncrRequest, origin: str | None, plan: Plan
    ) -> list[Effect]:
        if req.hops >= MAX_HOPS:
            failure = Failure("unavailable", "could not agree on a coordinator (ring views differ); retry")
            return [self._answer(req.rid, origin, failure)]
        target = plan.targets[0]
        op_id = self._new_op(
            Op("forward", req.rid, origin, now, now + self.config.request_timeout * 2, extra=target)
        )
        self.metrics.forwarded += 1
        return [Send(target, replace(req, rid=op_id, hops=req.hops + 1))]

    def _on_forward_reply(self, now: float, msg: ClientReply) -> list[Effect]:
        op = self.ops.pop(msg.rid, None)
        if op is None or op.kind != "forward":
            return []
        return [self._answer(op.rid, op.origin, msg.result)]

    def _create_keyspace(self, req: KeyspaceRequest, origin: str | None) -> list[Effect]:
        new = req.definition
        existing = self.keyspaces.get(new.name)
        if existing is not None and existing != new:
            raise BadInput(
                f"keyspace {new.name} already exists with policy={existing.policy} n={existing.n} "
                f"quorum={existing.quorum}"
            )
        self._learn(new)
        return [
            *self._broadcast_schema(),
            self._answer(req.rid, origin, KeyspaceResult(new, existing is None), durable=True),
        ]

    def _learn(self, ks: KeyspaceDef) -> None:
        known = self.keyspaces.get(ks.name)
        if known is ks or known == ks:
            return
        if known is not None and ks == self._implicit(ks.name):
            # A keyspace created by first use never replaces a defined one: a node that had not
            # heard of it yet would otherwise redefine it cluster-wide through gossip (a strict
            # keyspace turned sloppy). Found by `bhandar chaos --seed 38 --ops 3000 --faults all`.
            return
        self.keyspaces[ks.name] = ks
        self.store.put_meta("keyspaces", [[k.name, k.policy, k.n, k.quorum] for k in self.keyspaces.values()])

    def _implicit(self, name: str) -> KeyspaceDef:
        """The definition a keyspace gets when a request uses its name first."""
        return KeyspaceDef(name, n=self.config.default_n)

    def _broadcast_schema(self) -> list[Effect]:
        update = SchemaUpdate(tuple(self.keyspaces.values()))
        peers = self.gossip.membership.peers() if self.gossip is not None else self.ring.nodes
        return [Send(peer, update) for peer in peers if peer != self.id]
