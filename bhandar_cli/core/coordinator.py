"""The coordinator role: every client request, local or forwarded, enters here.

It validates the request, plans its replicas, and either coordinates it (reads.py, writes.py),
forwards it once to the node that should (a replica: the first live home replica, or a fallback
when none is up), or hands a command to its role: `repair` to anti-entropy, `decommission` to
streaming. Keyspace definitions are created here and broadcast to every peer.
"""

from __future__ import annotations

from dataclasses import replace

from bhandar_cli.core.antientropy import AntiEntropy
from bhandar_cli.core.config import LEVELS, KeyspaceDef, NodeConfig, one_of
from bhandar_cli.core.errors import BadInput, BhandarError, TooLarge, Unavailable
from bhandar_cli.core.keyspaces import Keyspaces
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
    PutRequest,
    RepairRequest,
    SchemaUpdate,
    Send,
)
from bhandar_cli.core.metrics import NodeMetrics
from bhandar_cli.core.ops import ForwardOp, answer
from bhandar_cli.core.optable import OpTable
from bhandar_cli.core.quorum import Plan, plan_replicas, unavailable, write_quorum
from bhandar_cli.core.reads import ReadCoordinator
from bhandar_cli.core.ring import key_token
from bhandar_cli.core.ringview import RingView
from bhandar_cli.core.streaming import Streaming
from bhandar_cli.core.writes import WriteCoordinator

MAX_HOPS = 2
TOKEN_CACHE = 1 << 16  # ring positions of recently used keys kept, at most


class Coordinator:
    """Entry point of client requests: validation, the choice of coordinator, forwarding."""

    def __init__(
        self,
        node_id: str,
        config: NodeConfig,
        keyspaces: Keyspaces,
        ring_view: RingView,
        ops: OpTable,
        metrics: NodeMetrics,
        reads: ReadCoordinator,
        writes: WriteCoordinator,
        anti_entropy: AntiEntropy,
        streaming: Streaming,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.keyspaces = keyspaces
        self.ring_view = ring_view
        self.ops = ops
        self.metrics = metrics
        self.reads = reads
        self.writes = writes
        self.anti_entropy = anti_entropy
        self.streaming = streaming
        # (forwarding node, its op id) -> when to forget it. A duplicated forwarded put would
        # otherwise be coordinated twice and stored as two siblings with the same value.
        self._recent_forwards: dict[tuple[str, int], float] = {}
        self._tokens: dict[tuple[str, str], int] = {}

    def request(self, now: float, req: ClientRequest, origin: str | None) -> list[Effect]:
        """A client request: from a local client (`origin` None) or forwarded by node `origin`."""
        if origin is not None and self._seen_forward(now, origin, req.rid):
            return []  # the network delivered this forwarded request twice; the first is handled
        try:
            if isinstance(req, KeyspaceRequest):
                return self._create_keyspace(req, origin)
            if isinstance(req, RepairRequest):
                return self.anti_entropy.repair_now(now, req.rid, origin, req.keyspace)
            if isinstance(req, DecommissionRequest):
                return self.streaming.decommission(now, req.rid, origin)
            ks, out = self._keyspace_for(req)
            self._validate(req, ks)
            plan = self._plan(ks, req.key, now)
            if isinstance(req, GetRequest):
                return out + self.reads.get(now, req, origin, ks, plan)
            needed = write_quorum(plan, req.consistency, ks.n)
            if len(plan.targets) + len(plan.pending) < needed:
                failure = unavailable(self.node_id, ks, plan, req.consistency, write=True)
                return [*out, answer(req.rid, origin, failure)]
            # A fallback coordinates only when no home replica is up: each write it coordinates
            # mints a new actor, and contexts bloated with them get pruned, which can bring
            # superseded siblings back. Found by `bhandar chaos --seed 2138 --ops 5000 --faults all`.
            me = self.node_id
            if me not in plan.targets or (me not in plan.home and plan.targets[0] in plan.home):
                return out + self._forward(now, req, origin, plan)
            if self.ring_view.status in ("leaving", "left"):
                # A leaving node has streamed (or is about to stream) its data away: a write it
                # coordinated could rest on its own copy alone and leave with it. Another replica
                # coordinates. Found by `bhandar chaos --seed 105 --ops 3000` (LSM storage).
                others = tuple(t for t in plan.targets if t != me)
                if not others:
                    raise Unavailable(f"{me} is leaving the ring and no other replica is reachable")
                return out + self._forward(now, req, origin, replace(plan, targets=others))
            self.metrics.coordinated += 1
            if isinstance(req, IncrRequest):
                return out + self.writes.incr(now, req, origin, ks, plan, needed)
            return out + self.writes.put(now, req, origin, ks, plan, needed)
        except BhandarError as exc:
            return [answer(req.rid, origin, Failure(exc.code, str(exc), coordinator=self.node_id))]

    def on_forward_reply(self, now: float, src: str, msg: ClientReply) -> list[Effect]:
        """The answer of a coordinator this node forwarded a request to: relay it."""
        op = self.ops.get(msg.rid)
        if not isinstance(op, ForwardOp):
            return []
        self.ops.discard(msg.rid)
        return [answer(op.rid, op.origin, msg.result)]

    def expire_forward(self, op: ForwardOp) -> list[Effect]:
        failure = Failure(
            "timeout", f"forwarded to {op.target}, which did not answer in time", coordinator=self.node_id
        )
        return [answer(op.rid, op.origin, failure)]

    def on_schema(self, now: float, src: str, msg: SchemaUpdate) -> list[Effect]:
        self.keyspaces.learn_all(msg.keyspaces)
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

    def _keyspace_for(self, req: PutRequest | GetRequest | IncrRequest) -> tuple[KeyspaceDef, list[Effect]]:
        ks = self.keyspaces.get(req.keyspace)
        if ks is not None:
            return ks, []
        if self.ring_view.status == "joining":
            # A joining node may not have heard the cluster's keyspaces yet: creating this one
            # with the defaults would serve a strict keyspace as sloppy (or a counter keyspace as
            # siblings). Found by `bhandar chaos --seed 38 --ops 3000 --faults all`.
            raise Unavailable(
                f"{self.node_id} is joining and does not know keyspace {req.keyspace} yet; retry"
            )
        # Using a new keyspace name creates it with the default policy, everywhere.
        ks = self.keyspaces.implicit(req.keyspace)
        self.keyspaces.learn(ks)
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

    def _forward(
        self, now: float, req: PutRequest | IncrRequest, origin: str | None, plan: Plan
    ) -> list[Effect]:
        if req.hops >= MAX_HOPS:
            failure = Failure("unavailable", "could not agree on a coordinator (ring views differ); retry")
            return [answer(req.rid, origin, failure)]
        target = plan.targets[0]
        op_id = self.ops.add(ForwardOp(req.rid, origin, now + self.config.request_timeout * 2, target))
        self.metrics.forwarded += 1
        return [Send(target, replace(req, rid=op_id, hops=req.hops + 1))]

    def _create_keyspace(self, req: KeyspaceRequest, origin: str | None) -> list[Effect]:
        new = req.definition
        existing = self.keyspaces.get(new.name)
        if existing is not None and existing != new:
            raise BadInput(
                f"keyspace {new.name} already exists with policy={existing.policy} n={existing.n} "
                f"quorum={existing.quorum}"
            )
        self.keyspaces.learn(new)
        return [
            *self._broadcast_schema(),
            answer(req.rid, origin, KeyspaceResult(new, existing is None), durable=True),
        ]

    def _broadcast_schema(self) -> list[Effect]:
        update = SchemaUpdate(self.keyspaces.all())
        return [Send(peer, update) for peer in self.ring_view.peers()]
