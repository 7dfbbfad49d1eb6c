"""Who is in the ring and who is up, as one node sees it.

With gossip (the default) the ring follows the node's membership table: the *current* ring of
normal and leaving members, the *future* ring of normal and joining ones. Without it (ping
liveness) the ring is the one the driver gave, and every member is `normal`.
"""

from __future__ import annotations

from bhandar_cli.core.membership.gossip import GossipLiveness
from bhandar_cli.core.membership.liveness import Liveness
from bhandar_cli.core.membership.members import Membership, MemberState
from bhandar_cli.core.membership.ring import Ring


class RingView:
    """The rings, member statuses and liveness the node's roles route by."""

    def __init__(self, node_id: str, liveness: Liveness, gossip: GossipLiveness | None, ring: Ring) -> None:
        self.node_id = node_id
        self.liveness = liveness
        self.gossip = gossip
        self._static = ring

    @property
    def ring(self) -> Ring:
        """The current ring: gossip's view (normal and leaving members), or the driver's."""
        if self.gossip is not None:
            return self.gossip.membership.ring("current")
        return self._static

    def has_heard(self, peer: str) -> bool:
        """Has this life of the node heard of `peer` (so it knows where `peer` is now)? The cheap
        form of the members view's "heard" column, for drivers that wait for a cluster to settle."""
        if self.gossip is None:
            return peer in self._static.nodes
        return peer == self.node_id or peer in self.gossip.heard

    def pending_ring(self) -> Ring | None:
        """The future ring while a member is joining or leaving (writes go to it too), else None."""
        gossip = self.gossip
        if gossip is not None and gossip.membership.moving():
            return gossip.membership.ring("future")
        return None

    def future_ring(self) -> Ring:
        """The ring once the movement in progress finishes (normal and joining members)."""
        return self._membership().ring("future")

    def is_up(self, peer: str, now: float) -> bool:
        return self.liveness.is_up(peer, now)

    def peers(self) -> list[str]:
        """Every other member that has not left."""
        if self.gossip is not None:
            return self.gossip.membership.peers()
        return [p for p in self._static.nodes if p != self.node_id]

    @property
    def gossiping(self) -> bool:
        return self.gossip is not None

    @property
    def status(self) -> str:
        """This node's status: joining, normal, leaving or left (always normal without gossip)."""
        return self.gossip.membership.mine.status if self.gossip is not None else "normal"

    @property
    def mine(self) -> MemberState:
        """This node's own membership state (gossip only)."""
        return self._membership().mine

    def status_of(self, node: str) -> str:
        """A member's status as this node knows it ("unknown" without gossip, or if never heard of)."""
        return self.gossip.membership.status_of(node) if self.gossip is not None else "unknown"

    def moving(self) -> bool:
        """Is a member joining or leaving, as far as this node knows?"""
        return self.gossip is not None and self.gossip.membership.moving()

    def set_status(self, status: str) -> None:
        """Announce a new status of this node (gossip spreads it)."""
        self._gossip().set_status(status)

    def merge(self, state: MemberState) -> None:
        """Take a member's state heard outside gossip (a joiner asking for its stream)."""
        self._membership().merge(state)

    def address_of(self, node: str) -> str:
        """Where `node` listens for peers ("host:port"), as membership says; "" if unknown."""
        return self.gossip.membership.address_of(node) if self.gossip is not None else ""

    def _gossip(self) -> GossipLiveness:
        if self.gossip is None:
            raise RuntimeError(f"{self.node_id} keeps no gossip membership: range movement needs it")
        return self.gossip

    def _membership(self) -> Membership:
        return self._gossip().membership
