"""One node of the store as a sans-I/O state machine: coordinator and replica roles.

Drivers feed it client requests (`request`), messages from peers (`handle`) and the passage of time
(`tick`, whenever `now >= next_deadline()`), and carry out the effects it returns: `Send`, `Respond`
and `Note`. Effects marked durable go out only after the driver synced the node's store: that is
how "acknowledged only after it is durable" holds without the core doing any I/O.

Writes are coordinated by a replica: the first live home replica, or a fallback standing in for a
down one (sloppy quorum). A node that receives a write it should not coordinate forwards it once.
The coordinator merges the write into its own copy, makes it durable, then sends the whole merged
record to the other replicas and answers after W acknowledgements (itself included). Reads go to
the same replicas; the coordinator answers after R replies, then repairs the replicas that answered
with older versions (read repair).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import replace
from random import Random
from typing import Any

from bhandar_cli.core import antientropy as ae
from bhandar_cli.core import streaming as st
from bhandar_cli.core.antientropy import RepairBatch, RepairRole
from bhandar_cli.core.config import COUNTERS, LEVELS, KeyspaceDef, NodeConfig, required
from bhandar_cli.core.errors import BadInput, BhandarError, Refused, TooLarge, Unavailable
from bhandar_cli.core.gossip import GossipLiveness
from bhandar_cli.core.handoff import HandoffRole
from bhandar_cli.core.hints import HintQueue
from bhandar_cli.core.liveness import Liveness, PingLiveness
from bhandar_cli.core.membership import MemberState
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
    ReplicaAck,
    ReplicaRead,
    ReplicaReadReply,
    ReplicaWrite,
    SchemaUpdate,
    Send,
)
from bhandar_cli.core.metrics import NodeMetrics
from bhandar_cli.core.phi import PhiConfig
from bhandar_cli.core.quorum import Op, Plan, plan_replicas
from bhandar_cli.core.reads import ReadRole
from bhandar_cli.core.records import Record
from bhandar_cli.core.ring import Ring, key_token
from bhandar_cli.core.store import Store
from bhandar_cli.core.streaming import Movement, StreamRole
from bhandar_cli.core.writes import WriteRole

MAX_HOPS = 2


class Node(WriteRole, ReadRole, HandoffRole, RepairRole, StreamRole):
    """A replica and coordinator. All state that is not in `store` is lost when the node crashes."""

    def __init__(
        self,
        node_id: str,
        ring: Ring,
        store: Store,
        rng: Random,
        now: float,
        config: NodeConfig | None = None,
        liveness: Liveness | None = None,
        *,
        status: str = "normal",
        seeds: list[str] | None = None,
        zone: str | None = None,
        tokens: tuple[int, ...] | None = None,
        address: str = "",
        http: str = "",
    ) -> None:
        """`ring` is the cluster as the driver knows it at boot; with gossip (the default) the
        node then keeps its own view. A joining node is started with `status="joining"` and its
        tokens; it bootstraps, then announces itself normal."""
        self.id = node_id
        self.store = store
        # After a restore from a snapshot the node's own counters went back in time; writing as
        # a new actor keeps it from reusing dots (and counter entries) it handed out since.
        self.home_actor = str(store.get_meta("actor") or node_id)
        self.rng = rng
        self.config = config or NodeConfig()
        self.started = now
        self._static_ring = ring
        self.gossip: GossipLiveness | None = None
        if liveness is None and self.config.liveness == "gossip":
            liveness = self.gossip = self._start_gossip(ring, now, status, seeds, zone, tokens, address, http)
        elif isinstance(liveness, GossipLiveness):
            self.gossip = liveness
        self.liveness: Liveness = liveness or PingLiveness(
            node_id, ring.nodes, now, self.config.ping_interval, self.config.down_after
        )
        counters = replace(COUNTERS, n=self.config.default_n)
        self.keyspaces: dict[str, KeyspaceDef] = {counters.name: counters}
        for fields in store.get_meta("keyspaces") or []:
            ks = KeyspaceDef(*fields)
            self.keyspaces[ks.name] = ks
        self.hints = HintQueue(store, self._policy, self.config.hint_max_per_target, self.config.hint_max_age)
        self.metrics = NodeMetrics()
        self.ops: dict[int, Op] = {}
        self._timers: list[tuple[float, int]] = []
        # Op ids travel in replies. Each life of a node starts them at a random point, so a late
        # reply to a request of a previous life (before a crash) is never taken for the answer to
        # a new one: that mixed up records of two keys. Found by `bhandar chaos --seed 189
        # --ops 2000 --faults all`.
        self._next_op = rng.getrandbits(48) + 1
        self._next_hint_round = now
        self._handoffs_in_flight: dict[str, int] = {}
        # (forwarding node, its op id) -> when to forget it. A duplicated forwarded put would
        # otherwise be coordinated twice and stored as two siblings with the same value.
        self._recent_forwards: dict[tuple[str, int], float] = {}
        self._tokens: dict[tuple[str, str], int] = {}  # ring positions of recently used keys
        # Anti-entropy and range movement (see antientropy.py and streaming.py).
        self.repairs: dict[int, ae.RepairSession] = {}
        self.repair_batches: dict[int, RepairBatch] = {}
        self.last_repair: dict[ae.RangeKey, float] = {}
        self.confirmed: dict[tuple[str, str], tuple[bytes, set[str]]] = {}
        self.reaped: dict[tuple[str, str], float] = {}
        self._repair_queue: list[tuple[KeyspaceDef, int, int, str]] = []
        self._next_repair = now + self.config.repair_interval * (0.5 + rng.random())
        self.outgoing: dict[tuple[str, int], st.OutStream] = {}
        self.received_streams = 0
        self._next_housekeeping = now
        self._saved_members = -1
        mine = self.gossip.membership.mine if self.gossip is not None else None
        self.movement: Movement | None = None
        if mine is not None and mine.status in ("joining", "leaving"):
            kind = "join" if mine.status == "joining" else "leave"
            self.movement = Movement(kind, now + self.config.join_delay)

    def _start_gossip(
        self,
        ring: Ring,
        now: float,
        status: str,
        seeds: list[str] | None,
        zone: str | None,
        tokens: tuple[int, ...] | None,
        address: str,
        http: str,
    ) -> GossipLiveness:
        store, cfg = self.store, self.config
        # A restart must look newer than anything gossip still carries about this node.
        generation = int(store.get_meta("generation") or 0) + 1
        store.put_meta("generation", generation)
        by_node = ring.tokens_by_node()
        known = [MemberState(n, ring.zones.get(n, n), tuple(by_node[n])) for n in ring.nodes if n != self.id]
        for fields in store.get_meta("members") or []:
            if fields[0] != self.id:
                known.append(
                    MemberState(fields[0], fields[1], tuple(fields[2]), fields[3], fields[4], fields[5])
                )
        mine_tokens = tokens if tokens is not None else tuple(by_node.get(self.id, ()))
        me = MemberState(
            self.id,
            zone or ring.zones.get(self.id, "z1"),
            tuple(mine_tokens),
            str(store.get_meta("status") or status),
            generation,
            0,
            address,
            http,
        )
        phi = PhiConfig(
            threshold=cfg.phi_threshold,
            acceptable_heartbeat_pause=cfg.phi_pause,
            first_heartbeat_estimate=cfg.gossip_interval,
        )
        gossip = GossipLiveness(
            me,
            _newest(known),
            seeds if seeds is not None else list(ring.nodes),
            now,
            Random(self.rng.getrandbits(64)),
            cfg.gossip_interval,
            cfg.gossip_fanout,
            phi,
            schema=lambda: tuple(self.keyspaces.values()),
            on_schema=self._learn_all,
        )
        store.put_meta("status", me.status)
        return gossip

    @property
    def ring(self) -> Ring:
        """The current ring: gossip's view (normal and leaving members), or the static one."""
        if self.gossip is not None:
            return self.gossip.membership.ring("current")
        return self._static_ring

    @ring.setter
    def ring(self, ring: Ring) -> None:
        """Tell the node about members it has not heard of (drivers without gossip seeds)."""
        self._static_ring = ring
        if self.gossip is not None:
            by_node = ring.tokens_by_node()
            for node in ring.nodes:
                if node not in self.gossip.membership.members:
                    self.gossip.membership.merge(
                        MemberState(node, ring.zones.get(node, node), tuple(by_node[node]))
                    )

    # --- inputs -------------------------------------------------------------------------------

    def request(self, now: float, req: ClientRequest) -> list[Effect]:
        """A request from a client connected to this node."""
        return self._client(now, req, None)

    def handle(self, now: float, src: str, msg: object) -> list[Effect]:
        """A message from peer `src`."""
        self.liveness.heard_from(src, now)
        # Dispatch on the exact message type: this runs for every message, and a chain of
        # isinstance checks cost more than the handling of a small message.
        handler = _HANDLERS.get(msg.__class__)
        if handler is not None:
            return handler(self, now, src, msg)
        out = self.liveness.handle(now, src, msg)
        return [] if out is None else out

    def _on_replica_read(self, now: float, src: str, msg: ReplicaRead) -> list[Effect]:
        self.metrics.replica_requests += 1
        self._learn(msg.keyspace)
        return [Send(src, ReplicaReadReply(msg.op, self._local_view(msg.keyspace.name, msg.key)))]

    def _on_client_message(self, now: float, src: str, msg: ClientRequest) -> list[Effect]:
        return self._client(now, msg, src)

    def _on_client_reply(self, now: float, src: str, msg: ClientReply) -> list[Effect]:
        return self._on_forward_reply(now, msg)

    def _on_repair_probe(self, now: float, src: str, msg: ae.RepairProbe) -> list[Effect]:
        return self._on_probe(src, msg)

    def _on_repair_fetch(self, now: float, src: str, msg: ae.RepairFetch) -> list[Effect]:
        return self._on_fetch(src, msg)

    def _on_repair_push(self, now: float, src: str, msg: ae.RepairPush) -> list[Effect]:
        return self._on_push(src, msg)

    def _on_schema(self, now: float, src: str, msg: SchemaUpdate) -> list[Effect]:
        self._learn_all(msg.keyspaces)
        return []

    def _learn_all(self, keyspaces: tuple[KeyspaceDef, ...]) -> None:
        for ks in keyspaces:
            self._learn(ks)

    def tick(self, now: float) -> list[Effect]:
        out = self.liveness.tick(now)
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, op_id = heapq.heappop(timers)
            op = self.ops.get(op_id)
            if op is not None and op.deadline <= now:
                out.extend(self._expire(now, op_id, op))
        if now >= self._next_hint_round:
            self._next_hint_round = now + self.config.hint_delivery_interval
            self.metrics.hints_expired += self.hints.expire(now)
            if self.config.hinted_handoff:
                out.extend(self._deliver_hints(now))
        if now >= self._next_housekeeping:
            self._next_housekeeping = now + 0.25
            out.extend(self.expire_repairs(now))
            out.extend(self.movement_tick(now))
            self._save_members()
        out.extend(self.background_repair(now))
        return out

    def _save_members(self) -> None:
        """Persist the membership table when ownership changed, so a restart knows the cluster."""
        gossip = self.gossip
        if gossip is None or gossip.membership.version == self._saved_members:
            return
        self._saved_members = gossip.membership.version
        self.store.put_meta(
            "members",
            [[m.id, m.zone, list(m.tokens), m.status, m.generation, m.heartbeat] for m in gossip.digest()],
        )
        self.store.put_meta("status", gossip.membership.mine.status)

    def next_deadline(self) -> float:
        deadline = self.liveness.next_deadline()
        if self._next_hint_round < deadline:
            deadline = self._next_hint_round
        if self._next_housekeeping < deadline:
            deadline = self._next_housekeeping
        if self.config.repair_interval > 0 and self._next_repair < deadline:
            deadline = self._next_repair
        timers = self._timers
        # Most requests finish long before their deadline; drop their timers here so the driver
        # does not wake the node for nothing (one wasted tick per request, otherwise).
        while timers and timers[0][1] not in self.ops:
            heapq.heappop(timers)
        if timers and timers[0][0] < deadline:
            deadline = timers[0][0]
        return deadline

    # --- views for clients and tools (pure reads) ------------------------------------------------

    def local_record(self, keyspace: str, key: str) -> Record | None:
        return self.store.get(keyspace, key)

    def hinted_record(self, keyspace: str, key: str) -> Record | None:
        return self.hints.record_for(keyspace, key)

    # --- client requests ---------------------------------------------------------------------

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
            raise BadInput(f"unknown consistency level {req.consistency!r} (use ONE, QUORUM or ALL)")
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

    def _expire(self, now: float, op_id: int, op: Op) -> list[Effect]:
        self.ops.pop(op_id, None)
        if op.kind == "handoff":
            target = op.extra[0]  # type: ignore[index]
            self._handoffs_in_flight[target] = max(0, self._handoffs_in_flight.get(target, 1) - 1)
            return []
        if op.kind == "forward":
            failure = Failure(
                "timeout", f"forwarded to {op.extra}, which did not answer in time", coordinator=self.id
            )
            return [self._answer(op.rid, op.origin, failure)]
        if op.answered:
            return self._read_repair(now, op) if op.kind == "get" else []
        op.answered = True
        got = len(op.replies) if op.kind == "get" else len(op.acks)
        ms = (now - op.started) * 1000.0
        failure = Failure(
            "timeout",
            f"timed out after {ms:.0f} ms: {got} of {len(op.targets)} replicas answered, "
            f"{op.level} needs {op.needed}"
            + ("" if op.kind == "get" else "; the write is not undone: the replicas that took it keep it"),
            answered=got,
            needed=op.needed,
            coordinator=self.id,
        )
        return [self._finish(now, op, failure), *(self._read_repair(now, op) if op.kind == "get" else [])]


# Handlers of peer messages, by exact type (messages are final dataclasses, never subclassed).
_HANDLERS: dict[type, Callable[[Node, float, str, Any], list[Effect]]] = {
    ReplicaWrite: Node._on_replica_write,
    ReplicaAck: Node._on_ack,
    ReplicaRead: Node._on_replica_read,
    ReplicaReadReply: Node._on_read_reply,
    PutRequest: Node._on_client_message,
    GetRequest: Node._on_client_message,
    IncrRequest: Node._on_client_message,
    KeyspaceRequest: Node._on_client_message,
    ClientReply: Node._on_client_reply,
    SchemaUpdate: Node._on_schema,
    RepairRequest: Node._on_client_message,
    DecommissionRequest: Node._on_client_message,
    ae.RepairProbe: Node._on_repair_probe,
    ae.RepairProbeReply: Node._on_probe_reply,
    ae.RepairFetch: Node._on_repair_fetch,
    ae.RepairFetchReply: Node._on_fetch_reply,
    ae.RepairPush: Node._on_repair_push,
    ae.RepairDone: Node._on_repair_done,
    st.StreamRequest: Node._on_stream_request,
    st.StreamBatch: Node._on_stream_batch,
    st.StreamAck: Node._on_stream_ack,
}


def _newest(states: list[MemberState]) -> list[MemberState]:
    """One state per member: the newest (by generation, then heartbeat)."""
    best: dict[str, MemberState] = {}
    for state in states:
        if state.id not in best or state.version > best[state.id].version:
            best[state.id] = state
    return list(best.values())
