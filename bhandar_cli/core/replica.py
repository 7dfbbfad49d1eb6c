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

This class wires the roles together; each lives in its own module: requests.py (client requests,
forwarding, keyspaces), node_membership.py (gossip and the ring), writes.py, reads.py, handoff.py,
antientropy.py (Merkle repair, reaping) and streaming.py (join, decommission).
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
from bhandar_cli.core.config import COUNTERS, KeyspaceDef, NodeConfig
from bhandar_cli.core.gossip import GossipLiveness
from bhandar_cli.core.handoff import HandoffRole
from bhandar_cli.core.hints import HintQueue
from bhandar_cli.core.liveness import Liveness, PingLiveness
from bhandar_cli.core.messages import (
    ClientReply,
    ClientRequest,
    DecommissionRequest,
    Effect,
    Failure,
    GetRequest,
    IncrRequest,
    KeyspaceRequest,
    PutRequest,
    RepairRequest,
    ReplicaAck,
    ReplicaRead,
    ReplicaReadReply,
    ReplicaWrite,
    SchemaUpdate,
    Send,
)
from bhandar_cli.core.metrics import NodeMetrics
from bhandar_cli.core.node_membership import MembershipRole
from bhandar_cli.core.quorum import Op
from bhandar_cli.core.reads import ReadRole
from bhandar_cli.core.records import Record
from bhandar_cli.core.requests import RequestRole
from bhandar_cli.core.ring import Ring
from bhandar_cli.core.store import Store
from bhandar_cli.core.streaming import Movement, StreamRole
from bhandar_cli.core.writes import WriteRole


class Node(RequestRole, MembershipRole, WriteRole, ReadRole, HandoffRole, RepairRole, StreamRole):
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
