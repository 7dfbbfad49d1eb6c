"""Hinted handoff delivery: a fallback sends its hints home when the target is seen up again.

Some hints must not wait for their target: expired ones (the target has been away longer than
`hint_max_age`), those for a target that is leaving or left the ring (a leaving node refuses
handoffs, and a departed one never comes back), and all of them when this node is leaving the ring
itself. Each goes instead to a replica of its key that is up: one of the current ring, or of the
future ring when this node or the target is leaving (and stays here if this node has become one);
anti-entropy carries it to the other replicas later. Under a sloppy quorum a hint may be the only
copy of an acknowledged write, so a hint is removed only once a replica holds it.
"""

from __future__ import annotations

from bhandar_cli.core.membership import key_token
from bhandar_cli.core.model import KeyspaceDef, NodeConfig, Record, merge_records
from bhandar_cli.core.protocol import Effect, Note, PendingHandoff, ReplicaAck, ReplicaWrite, Send
from bhandar_cli.core.roles.role_context import RoleContext

Delivery = tuple[str, tuple[str, str, Record]]  # (destination, (keyspace, key, record))


class HintedHandoff:
    """Sends each target's hints in bounded batches, one batch in flight per target: a batch
    every delivery interval, the first one as soon as gossip sees the target back up, and the
    next one as soon as a batch was taken whole, so a target back after a partition gets its
    hints at the pace it stores them, not one batch per interval. Every interval also expires
    old hints."""

    def __init__(self, context: RoleContext, config: NodeConfig, now: float) -> None:
        self.node_id = context.node_id
        self.sibling_limit = context.sibling_limit  # a hint merged here can take a key past the limit
        self.config = config
        self.hints = context.hints
        self.store = context.store
        self.keyspaces = context.keyspaces
        self.ring_view = context.ring_view
        self.pending = context.pending
        self.metrics = context.metrics
        self._next_round = now
        self._in_flight: dict[str, int] = {}  # target -> deliveries not yet acknowledged
        self._refused: set[str] = set()  # targets whose batch in flight had a delivery fail

    def next_deadline(self) -> float:
        return self._next_round

    def tick(self, now: float) -> list[Effect]:
        if now < self._next_round:
            return []
        self._next_round = now + self.config.hint_delivery_interval
        self.metrics.hints_expired += self.hints.expire(now)
        if not self.config.hinted_handoff:
            return []
        out: list[Effect] = []
        for target in self.hints.targets():
            if not self._in_flight.get(target):
                out.extend(self._send_batch(now, target))
        return out

    def peers_back(self, now: float, liveness_effects: list[Effect]) -> list[Effect]:
        """The failure detector's effects, plus the first batch of hints for every peer its notes
        announce back up (gossip's transitions; ping liveness has none, and waits for the tick)."""
        out = liveness_effects
        if not self.config.hinted_handoff:
            return out
        for effect in liveness_effects:
            if isinstance(effect, Note) and effect.data.get("up") is True:
                target = effect.data["peer"]
                if not self._in_flight.get(target) and self.hints.pending(target):
                    out = [*out, *self._send_batch(now, target)]
        return out

    def _send_batch(self, now: float, target: str) -> list[Effect]:
        """The next batch of `target`'s hints: home when it is up, else those that must not wait
        for it, each to another replica of its key."""
        if self.ring_view.is_up(target, now) and not self._departing(target):
            batch: list[Delivery] = [(target, h) for h in self.hints.batch(target, self.config.hint_batch)]
        else:
            batch = self._redirected(now, target)
        self._in_flight[target] = len(batch)
        self._refused.discard(target)
        out: list[Effect] = []
        for destination, (keyspace, key, record) in batch:
            op = PendingHandoff(now + self.config.request_timeout, target, keyspace, key, record)
            op_id = self.pending.add(op)
            ks = self.keyspaces.get(keyspace) or KeyspaceDef(keyspace)
            out.append(Send(destination, ReplicaWrite(op_id, ks, key, record, None, "handoff")))
        return out

    def _departing(self, target: str) -> bool:
        """Is `target` leaving or gone? A leaving node refuses handoffs, so its hints waited (and
        were refused) for as long as its decommission ran; for good when that never ended."""
        return self.ring_view.status_of(target) in ("leaving", "left")

    def _redirected(self, now: float, target: str) -> list[Delivery]:
        """Hints for `target` (down, or leaving the ring) that must not wait for it, each with a
        replica of its key to take it."""
        view = self.ring_view
        leaving = view.status in ("leaving", "left")
        departing = self._departing(target)
        limit = self.config.hint_batch
        must_go = leaving or departing
        hints = self.hints.batch(target, limit) if must_go else self.hints.overdue(target, now, limit)
        if not hints:
            return []
        # The ring the key will have: a leaving target is still in the current one.
        ring = view.future_ring() if leaving or view.status_of(target) == "leaving" else view.ring
        out: list[Delivery] = []
        for keyspace, key, record in hints:
            ks = self.keyspaces.get(keyspace) or KeyspaceDef(keyspace)
            home = ring.preference_list(key_token(keyspace, key), ks.n)
            if self.node_id in home:  # the ring moved and this node is a replica of the key now
                merged = merge_records(ks.policy, self.store.get(keyspace, key), record)
                if merged is not None:
                    self.store.put(keyspace, key, merged)
                    self.sibling_limit.stored(keyspace, key, merged)
                if self.hints.remove(target, keyspace, key, delivered=record):
                    self.metrics.hints_delivered += 1
                continue
            up = [
                node
                for node in home
                if node != target and view.is_up(node, now) and not self._departing(node)
            ]
            if up:
                out.append((up[0], (keyspace, key, record)))
        return out

    def on_ack(self, now: float, op_id: int, msg: ReplicaAck, op: PendingHandoff) -> list[Effect]:
        """A delivery was answered. When that settles a batch that was taken whole, the target's
        next batch goes at once (a refusal waits for the next interval instead, so a target that
        refuses is not asked again and again)."""
        self.pending.discard(op_id)
        if not msg.ok:
            self._refused.add(op.target)
        elif self.hints.remove(op.target, op.keyspace, op.key, delivered=op.record):
            self.metrics.hints_delivered += 1
        if not self._settled(op.target) or op.target in self._refused or not self.config.hinted_handoff:
            return []
        return self._send_batch(now, op.target) if self.hints.pending(op.target) else []

    def expire(self, op: PendingHandoff) -> list[Effect]:
        """No acknowledgement in time: the hint stays queued for the next round."""
        self._refused.add(op.target)
        self._settled(op.target)
        return []

    def _settled(self, target: str) -> bool:
        """One delivery to `target` was acknowledged, refused or timed out: was it its batch's last?"""
        left = max(0, self._in_flight.get(target, 1) - 1)
        self._in_flight[target] = left
        return left == 0
