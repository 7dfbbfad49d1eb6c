"""One node of the store as a sans-I/O state machine: the whole surface a driver may use.

Drivers feed it client requests (`request`), messages from peers (`handle`) and the passage of time
(`tick`, whenever `now >= next_deadline()`), and carry out the effects it returns: `Send`, `Respond`
and `Note`, and `DotLeaseSaved`, handed back to `dot_lease_saved` (it is always durable). Effects
marked durable go out only after the driver synced the node's store: that is how "acknowledged
only after it is durable" holds without the core doing any I/O. Tools read the node through its
views (`info`, `members`, `hints_summary`, `records`, `digests`, `tree_entries`, `range_hashes`,
`metrics`, `ring`, `status`, `keyspaces`, `address_of`).

Writes are coordinated by a replica: the first live home replica, or a fallback standing in for a
down one (sloppy quorum). A node that receives a write it should not coordinate forwards it once.
The coordinator merges the write into its own copy and sends the whole merged record to the other
replicas while its own copy syncs, and answers after W acknowledgements (itself included, once
synced). Reads go to the same replicas; the coordinator answers after R replies, then repairs the
replicas that answered with older versions (read repair). The tunables (`config`) change at
runtime through `reconfigure` (core/model/live_config.py).

The node only wires its roles together, each an object handed the parts every role shares (one
`RoleContext`: core/roles/role_context.py) and its own collaborators: the coordinator
(core/roles/coordinator.py, with core/roles/read_path.py and core/roles/write_path.py), the replica
(core/roles/replica.py), hinted handoff (core/roles/handoff.py), ownership handoff
(core/roles/ownership.py), anti-entropy (core/repair/antientropy.py, core/repair/reaping.py),
streaming (core/roles/streaming.py) and the membership it routes by (core/membership/ringview.py,
core/membership/node_membership.py). The state several of them share is its own object: the op table
(core/protocol/pending_table.py), keyspace definitions (core/model/keyspaces.py), access tokens
(core/model/access_tokens.py), metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from random import Random
from typing import Any

from bhandar_cli.core.membership import (
    TRUST_ALL,
    Authorship,
    GossipLiveness,
    Liveness,
    MemberRow,
    MembershipSaver,
    MemberState,
    PingLiveness,
    Ring,
    RingView,
    boot_gossip,
)
from bhandar_cli.core.model import (
    BadInput,
    KeyspaceDef,
    Keyspaces,
    LiveConfig,
    NodeConfig,
    NodeMetrics,
    Record,
    SiblingLimit,
    Store,
    StoreDamage,
    TokenTable,
    config_view,
    retune,
)
from bhandar_cli.core.node_views import HintQueueRow, NodeInfo, NodeViews
from bhandar_cli.core.protocol import (
    ClientReply,
    ClientRequest,
    DecommissionRequest,
    DotLeaseSaved,
    Effect,
    GetRequest,
    IdSource,
    IncrRequest,
    KeyspaceRequest,
    Pending,
    PendingForward,
    PendingHandoff,
    PendingIncr,
    PendingOwnership,
    PendingPut,
    PendingRead,
    PendingTable,
    PutRequest,
    RepairRequest,
    ReplicaAck,
    ReplicaRead,
    ReplicaReadReply,
    ReplicaWrite,
    SchemaUpdate,
    Send,
)
from bhandar_cli.core.repair import (
    AntiEntropy,
    DamageRepair,
    HashIndex,
    IndexedStore,
    RepairDone,
    RepairFetch,
    RepairFetchReply,
    RepairProbe,
    RepairProbeReply,
    RepairPush,
    TombstoneReaper,
    Unrepaired,
)
from bhandar_cli.core.roles import (
    Coordinator,
    DotLease,
    ExactDots,
    ExpirySweeper,
    HintedHandoff,
    HintQueue,
    OwnershipHandoff,
    ReadCoordinator,
    Replica,
    RoleContext,
    StreamAck,
    StreamBatch,
    Streaming,
    StreamRequest,
    WriteCoordinator,
)

HOUSEKEEPING = 0.25  # seconds between checks of repair sessions, range movement and membership

Handler = Callable[[float, str, Any], list[Effect]]


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeBoot:
    """What a driver tells a node as it boots, besides its store and the ring it knows.

    A joining node boots with `status="joining"` and its `tokens`; it bootstraps, then announces
    itself normal. `seeds` are whom gossip asks first (node ids, or "host:port"; None: every node
    of the ring); `address` and `http` are where this node listens, as gossip tells its peers;
    `zone` overrides the ring's; `live` is the cluster configuration version to run
    (core/model/live_config.py); `authority` checks who said each fact gossip brings and seals what
    this node says (core/membership/authorship.py)."""

    status: str = "normal"
    seeds: tuple[str, ...] | None = None
    zone: str | None = None
    tokens: tuple[int, ...] | None = None
    address: str = ""
    http: str = ""
    live: LiveConfig | None = None
    authority: Authorship = TRUST_ALL


class Node:
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
        boot: NodeBoot | None = None,
    ) -> None:
        """`ring` is the cluster as the driver knows it at boot; with gossip (the default) the
        node then keeps its own view, from what `boot` says (`NodeBoot`)."""
        boot = boot if boot is not None else NodeBoot()
        self.id = node_id
        config = config or NodeConfig()
        # Every role writes records through `store`, which keeps the hash index anti-entropy
        # compares; views read the raw store (its storage figures).
        raw_store, hash_index = store, HashIndex(store)
        store = IndexedStore(raw_store, hash_index)
        # After a restore from a snapshot the node's own counters went back in time; writing as
        # a new actor keeps it from reusing dots (and counter entries) it handed out since.
        home_actor = str(store.get_meta("actor") or node_id)
        authority = boot.authority
        keyspaces = Keyspaces(store, config.default_n, authority)
        client_tokens = TokenTable(store, authority)
        gossip: GossipLiveness | None = None
        if liveness is None and config.liveness == "gossip":
            liveness = gossip = boot_gossip(
                node_id,
                ring,
                store,
                config,
                rng,
                now,
                status=boot.status,
                seeds=None if boot.seeds is None else list(boot.seeds),
                zone=boot.zone,
                tokens=boot.tokens,
                address=boot.address,
                http=boot.http,
                schema=keyspaces.all,
                on_schema=keyspaces.learn_all,
                schema_seals=keyspaces.seals,
                client_tokens=client_tokens,
                authority=authority,
            )
        elif isinstance(liveness, GossipLiveness):
            gossip = liveness
        if liveness is None:
            liveness = PingLiveness(node_id, ring.nodes, now, config.ping_interval, config.down_after)
        view = RingView(node_id, liveness, gossip, ring)
        hints = HintQueue(store, keyspaces.policy, config.hint_max_per_target, config.hint_max_age)
        metrics = NodeMetrics()
        # `rng` draws in this order (gossip's seed, the first id, the first repair): a seed must
        # replay the same run.
        ids = IdSource(rng.getrandbits(48) + 1)
        pending = PendingTable(ids)
        first_repair = now + config.repair_interval * (0.5 + rng.random())

        sibling_limit = SiblingLimit(config.sibling_max, metrics)
        unrepaired = Unrepaired(store)
        roles = RoleContext(
            node_id=node_id,
            store=store,
            keyspaces=keyspaces,
            ring_view=view,
            ids=ids,
            pending=pending,
            metrics=metrics,
            hints=hints,
            sibling_limit=sibling_limit,
        )
        replica = Replica(roles, unrepaired)
        reads = ReadCoordinator(roles, config, replica)
        lease = DotLease.load(store, home_actor)
        exact = ExactDots(store, lease)
        writes = WriteCoordinator(roles, config, replica, lease, exact)
        reaper = TombstoneReaper(node_id, config, store, view, metrics)
        anti_entropy = AntiEntropy(
            node_id=node_id,
            config=config,
            store=store,
            index=hash_index,
            keyspaces=keyspaces,
            ring_view=view,
            ids=ids,
            reaper=reaper,
            metrics=metrics,
            first_round=first_repair,
            sibling_limit=sibling_limit,
            unrepaired=unrepaired,
        )
        streaming = Streaming(roles, config, now)
        handoff = HintedHandoff(roles, config, now)
        ownership = OwnershipHandoff(roles, config, hash_index, now)
        coordinator = Coordinator(roles, config, reads, writes, anti_entropy, streaming)
        self.config = self._base_config = config
        self.live_config, self._gossip = LiveConfig(), gossip
        self._retuned: tuple[Any, ...] = (hints, sibling_limit, coordinator, reads, writes, reaper)
        self._retuned += (anti_entropy, streaming, handoff, ownership, anti_entropy._schedule)
        if boot.live is not None:
            self.reconfigure(boot.live)
        self._ring_view = view
        self._keyspaces = keyspaces
        self._client_tokens = client_tokens
        self._metrics = metrics
        self._pending = pending
        self._coordinator = coordinator
        self._reads = reads
        self._writes = writes
        self._handoff = handoff
        self._ownership = ownership
        self._anti_entropy = anti_entropy
        self._streaming = streaming
        # A store older than the life peers remember may reuse that life's dots: write as a new actor.
        self._saver = MembershipSaver(store, gossip, writes.adopt_actor) if gossip is not None else None
        self._damage = DamageRepair(anti_entropy, metrics)
        self._hash_index = hash_index
        self._expiry = ExpirySweeper(store, keyspaces, metrics)
        self._views = NodeViews(
            node_id,
            raw_store,
            hash_index,
            view,
            keyspaces,
            hints,
            anti_entropy,
            streaming,
            sibling_limit,
            self._damage.conditions,
        )
        self._next_housekeeping = now
        # The timers `next_deadline` reads, bound once: a driver asks after every step.
        deadlines = (liveness.next_deadline, handoff.next_deadline, anti_entropy.next_deadline)
        self._deadlines = (*deadlines, pending.next_deadline)
        # Peer messages by exact type (messages are final dataclasses, never subclassed): this runs
        # for every message, and a chain of isinstance checks cost more than handling a small one.
        forwarded: Handler = self._on_forwarded
        self._handlers: dict[type, Handler] = {
            ReplicaWrite: replica.on_write,
            ReplicaAck: self._on_replica_ack,
            ReplicaRead: replica.on_read,
            ReplicaReadReply: reads.on_reply,
            **dict.fromkeys((PutRequest, GetRequest, IncrRequest, KeyspaceRequest), forwarded),
            **dict.fromkeys((RepairRequest, DecommissionRequest), forwarded),
            ClientReply: coordinator.on_forward_reply,
            SchemaUpdate: coordinator.on_schema,
            RepairProbe: anti_entropy.on_probe,
            RepairProbeReply: anti_entropy.on_probe_reply,
            RepairFetch: anti_entropy.on_fetch,
            RepairFetchReply: anti_entropy.on_fetch_reply,
            RepairPush: anti_entropy.on_push,
            RepairDone: anti_entropy.on_done,
            StreamRequest: streaming.on_request,
            StreamBatch: streaming.on_batch,
            StreamAck: streaming.on_ack,
        }

    # --- inputs -------------------------------------------------------------------------------

    def request(self, now: float, req: ClientRequest) -> list[Effect]:
        """A request from a client connected to this node."""
        return self._coordinator.request(now, req, None)

    def handle(self, now: float, src: str, msg: object) -> list[Effect]:
        """A message from peer `src`."""
        liveness = self._ring_view.liveness
        liveness.heard_from(src, now)
        handler = self._handlers.get(msg.__class__)
        if handler is not None:
            return handler(now, src, msg)
        out = liveness.handle(now, src, msg)
        if self._saver is not None:  # a finished join or leave is kept now: a stop may come next
            self._saver.save()
        return [] if out is None else self._handoff.peers_back(now, out)

    def reconfigure(self, live: LiveConfig) -> NodeConfig:
        """Take version `live` of the cluster configuration now (over the config the node was built
        with); BadInput, with nothing changed, if its values break a rule. Returns the new config."""
        retune(config := live.apply(self._base_config), *self._retuned, gossip=self._gossip)
        self.config, self.live_config = config, live
        return config

    def dot_lease_saved(self, effect: DotLeaseSaved) -> None:
        """The driver synced the store after `effect` was returned (it is durable): the lease's
        mark is saved."""
        self._writes.lease.on_saved(effect)

    def storage_damaged(self, now: float, damage: list[StoreDamage]) -> list[Effect]:
        """The store found corruption (`Store.take_damage`): count and show it, repair it now."""
        lost = [d.keyspaces for d in damage]
        self._hash_index.forget(None if None in lost else {ks for kss in lost if kss for ks in kss})
        if any(d.metadata for d in damage):
            # The records of its dot counters may be gone (a table removed, a block lost): counting
            # on from what is left could hand out a dot again for another value. Write as a new
            # actor from now on, as after a restore; the time names it (no earlier life had it).
            actor = f"{self.id}~d{int(now * 1000)}"
            self._writes.store.put_meta("actor", actor)  # read at boot
            self._writes.adopt_actor(actor)
        return self._damage.on_damage(now, damage)

    def tick(self, now: float) -> list[Effect]:
        """Time passed: call whenever `now >= next_deadline()`."""
        out = self._handoff.peers_back(now, self._ring_view.liveness.tick(now))
        for _, op in self._pending.expired(now):
            out.extend(self._expire(now, op))
        out.extend(self._handoff.tick(now))
        if now >= self._next_housekeeping:
            self._next_housekeeping = now + HOUSEKEEPING
            out.extend(self._anti_entropy.expire(now))
            out.extend(self._streaming.tick(now))
            out.extend(self._ownership.tick(now))
            self._expiry.tick(now)
            if self._saver is not None:
                self._saver.save()
        out.extend(self._anti_entropy.tick(now))
        return out

    def next_deadline(self) -> float:
        """When the node next needs a `tick` (it may be in the past: tick at once)."""
        liveness, handoff, anti_entropy, ops = self._deadlines
        return min(liveness(), handoff(), self._next_housekeeping, anti_entropy(), ops())

    # --- views for clients and tools (pure reads) ------------------------------------------------

    @property
    def ring(self) -> Ring:
        """The current ring as this node sees it."""
        return self._ring_view.ring

    @property
    def status(self) -> str:
        """This node's own status: joining, normal, leaving or left (normal without gossip)."""
        return self._ring_view.status

    def status_of(self, member: str) -> str:
        """A member's status as this node knows it ("unknown" without gossip)."""
        return self._ring_view.status_of(member)

    @property
    def moving(self) -> bool:
        """Does this node know of a member joining or leaving?"""
        return self._ring_view.moving()

    def address_of(self, peer: str) -> str:
        """Where `peer` listens ("host:port", as gossip carries it); "" if unknown. A driver's
        network resolves node ids through this: membership, not the driver, knows the cluster."""
        return self._ring_view.address_of(peer)

    def is_up(self, peer: str, now: float) -> bool:
        return self._ring_view.is_up(peer, now)

    @property
    def keyspaces(self) -> Mapping[str, KeyspaceDef]:
        return self._keyspaces.view()

    @property
    def client_tokens(self) -> TokenTable:
        """The access tokens this node knows (gossip keeps them; the node's driver checks them)."""
        return self._client_tokens

    @property
    def metrics(self) -> NodeMetrics:
        return self._metrics

    def info(self, now: float, counts: bool = True) -> NodeInfo:
        info = self._views.info(now, counts)
        info["hot"] = self._coordinator.hot.view(now)  # client request rates of its hottest keys
        info["config"] = config_view(self.config, self.live_config)  # its version, values, keys set
        return info

    def members(self, now: float, placement: bool = False) -> list[MemberRow]:
        return self._views.members(now, placement)

    def member_states(self) -> tuple[MemberState, ...]:
        return self._views.member_states()

    def has_heard(self, peer: str) -> bool:
        """Has this life of the node heard of `peer`? (RingView.has_heard)"""
        return self._ring_view.has_heard(peer)

    def hints_summary(self, now: float) -> list[HintQueueRow]:
        return self._views.hints_summary(now)

    def remove_member(self, member: str, now: float) -> None:
        """Take `member` out of the cluster for good, without its help (`cluster remove`): this
        node seals the removal (Refused unless it holds the CA key) and gossip spreads it.
        BadInput for itself or a node its membership never knew."""
        gossip = self._ring_view.gossip
        if gossip is None:
            raise BadInput("this cluster keeps no gossip membership: there is nothing to remove from")
        if member == self.id:
            raise BadInput(f"{member} cannot remove itself: ask another issuing node")
        if member not in gossip.membership.members and member not in gossip.removals:
            raise BadInput(f"unknown node {member!r}: this node's membership never knew it")
        if member not in gossip.removals:
            gossip.remove(member, now)
        if self._saver is not None:
            self._saver.save()

    def goodbye(self) -> list[Send]:
        """This node stops cleanly: tell every peer (gossip membership only), so it is down in
        their eyes at once (core/membership/gossip.py `Goodbye`)."""
        gossip = self._ring_view.gossip
        if gossip is None:
            return []
        farewell = gossip.goodbye()
        return [Send(peer, farewell) for peer in gossip.membership.peers()]

    def records(self, keyspace: str, key: str) -> tuple[Record | None, Record | None]:
        """(own record, merged hints) of a key on this node."""
        return self._views.records(keyspace, key)

    def digests(self) -> list[list[Any]]:
        return self._views.digests()

    def tree_entries(self, keyspace: str, lo: int, hi: int) -> list[list[Any]]:
        return self._views.tree_entries(keyspace, lo, hi)

    def range_hashes(self, ranges: list[tuple[int, int]]) -> list[list[Any]]:
        return self._views.range_hashes(ranges)

    # --- routing -------------------------------------------------------------------------------

    def _on_forwarded(self, now: float, src: str, msg: ClientRequest) -> list[Effect]:
        return self._coordinator.request(now, msg, src)

    def _on_replica_ack(self, now: float, src: str, msg: ReplicaAck) -> list[Effect]:
        op = self._pending.get(msg.op)
        if isinstance(op, PendingHandoff):
            return self._handoff.on_ack(now, msg.op, msg, op)
        if isinstance(op, PendingOwnership):
            return self._ownership.on_ack(now, msg.op, src, msg, op)
        if isinstance(op, PendingPut | PendingIncr):
            return self._writes.on_ack(now, src, msg, op)
        return []

    def _expire(self, now: float, op: Pending) -> list[Effect]:
        if isinstance(op, PendingRead):
            return self._reads.expire(now, op)
        if isinstance(op, PendingPut | PendingIncr):
            return self._writes.expire(now, op)
        if isinstance(op, PendingForward):
            return self._coordinator.expire_forward(now, op)
        if isinstance(op, PendingOwnership):
            return self._ownership.expire(op)
        return self._handoff.expire(op)
