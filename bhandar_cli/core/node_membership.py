"""How a node keeps its membership: booting gossip from what it knew before a restart, the ring
it derives from gossip, and persisting the table when ownership changes."""

from __future__ import annotations

from random import Random

from bhandar_cli.core.gossip import GossipLiveness
from bhandar_cli.core.membership import MemberState
from bhandar_cli.core.node_base import NodeBase
from bhandar_cli.core.phi import PhiConfig
from bhandar_cli.core.ring import Ring


class MembershipRole(NodeBase):
    """Gossip start-up, the current ring, and the membership table on disk."""

    _static_ring: Ring
    _saved_members: int

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


def _newest(states: list[MemberState]) -> list[MemberState]:
    """One state per member: the newest (by generation, then heartbeat)."""
    best: dict[str, MemberState] = {}
    for state in states:
        if state.id not in best or state.version > best[state.id].version:
            best[state.id] = state
    return list(best.values())
