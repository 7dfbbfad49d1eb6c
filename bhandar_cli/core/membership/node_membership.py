"""A node's gossip membership across restarts: booting gossip from what the node knew before, and
saving the membership table back to the store whenever ownership changes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from random import Random
from typing import Any

from bhandar_cli.core.membership.authorship import TRUST_ALL, Authorship, Removal
from bhandar_cli.core.membership.gossip import GossipLiveness
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.membership.phi import PhiConfig
from bhandar_cli.core.membership.ring import Ring
from bhandar_cli.core.model import KeyspaceDef, NodeConfig, Store, TokenTable


def boot_gossip(
    node_id: str,
    ring: Ring,
    store: Store,
    config: NodeConfig,
    rng: Random,
    now: float,
    *,
    status: str,
    seeds: list[str] | None,
    zone: str | None,
    tokens: tuple[int, ...] | None,
    address: str,
    http: str,
    schema: Callable[[], tuple[KeyspaceDef, ...]],
    on_schema: Callable[[Iterable[KeyspaceDef], Any], None],
    schema_seals: Callable[[], tuple[Any, ...]] = tuple,
    client_tokens: TokenTable | None = None,
    authority: Authorship = TRUST_ALL,
) -> GossipLiveness:
    """Gossip for a node starting (or restarting) with `store`: the members of the boot `ring`
    and of the table it saved, itself under a new generation, and `status` unless the store
    remembers one. `schema`/`on_schema` carry keyspace definitions along with membership, and
    `client_tokens` the token table."""
    # A restart must look newer than anything gossip still carries about this node.
    generation = int(store.get_meta("generation") or 0) + 1
    store.put_meta("generation", generation)
    by_node = ring.tokens_by_node()
    known = [MemberState(n, ring.zones.get(n, n), tuple(by_node[n])) for n in ring.nodes if n != node_id]
    known.extend(saved_members(store, node_id))
    mine_tokens = tokens if tokens is not None else tuple(by_node.get(node_id, ()))
    me = MemberState(
        node_id,
        zone or ring.zones.get(node_id, "z1"),
        tuple(mine_tokens),
        str(store.get_meta("status") or status),
        generation,
        0,
        address,
        http,
    )
    phi = PhiConfig(
        threshold=config.phi_threshold,
        acceptable_heartbeat_pause=config.phi_pause,
        first_heartbeat_estimate=config.gossip_interval,
    )
    gossip = GossipLiveness(
        me,
        _newest(known),
        seeds if seeds is not None else list(ring.nodes),
        now,
        Random(rng.getrandbits(64)),
        config.gossip_interval,
        config.gossip_fanout,
        phi,
        schema=schema,
        on_schema=on_schema,
        schema_seals=schema_seals,
        client_tokens=client_tokens,
        authority=authority,
        removals=saved_removals(store),
    )
    store.put_meta("status", me.status)
    return gossip


class MembershipSaver:
    """Persists the gossip membership table when ownership changed, so a restart knows the cluster."""

    def __init__(self, store: Store, gossip: GossipLiveness, adopt_actor: Callable[[str], None]) -> None:
        self._store = store
        self._gossip = gossip
        self._adopt_actor = adopt_actor
        self._saved_version = -1
        self._saved_removals = len(gossip.removals)

    def save(self) -> None:
        """Save the table if ownership changed since the last save. When peers turned out to know
        a later life of this node (its store is an older copy: see `Node`), hand `adopt_actor`
        the actor to write as from now on."""
        membership = self._gossip.membership
        if membership.regenerated:
            # Peers knew a later life of this node: the next restart must start above it too.
            membership.regenerated = False
            generation = membership.mine.generation
            actor = f"{membership.me}~g{generation}"
            self._store.put_meta("generation", generation)
            self._store.put_meta("actor", actor)
            self._adopt_actor(actor)
        if len(self._gossip.removals) != self._saved_removals:  # an issuer removed a member: for good
            self._saved_removals = len(self._gossip.removals)
            removals = sorted(self._gossip.removals.values(), key=lambda r: r.node)
            self._store.put_meta("removals", [[r.node, r.at, r.seal.hex()] for r in removals])
        if membership.version == self._saved_version:
            return
        self._saved_version = membership.version
        self._store.put_meta(
            "members",
            [
                [m.id, m.zone, list(m.tokens), m.status, m.generation, m.heartbeat, m.address, m.http]
                for m in self._gossip.digest()
            ],
        )
        self._store.put_meta("status", membership.mine.status)


def saved_members(store: Store, node_id: str) -> list[MemberState]:
    """The other members as this node last saved them (with their addresses: a restarted node
    finds its peers without its seeds). Tables saved before addresses were kept have six fields."""
    found = []
    for fields in store.get_meta("members") or []:
        if fields[0] != node_id:
            address, http = (str(fields[6]), str(fields[7])) if len(fields) >= 8 else ("", "")
            found.append(
                MemberState(
                    str(fields[0]),
                    str(fields[1]),
                    tuple(fields[2]),
                    str(fields[3]),
                    int(fields[4]),
                    int(fields[5]),
                    address,
                    http,
                )
            )
    return found


def saved_removals(store: Store) -> list[Removal]:
    """The removals this node knew when it stopped (its own store: taken as they are)."""
    saved = store.get_meta("removals") or []
    return [Removal(str(node), float(at), bytes.fromhex(str(seal))) for node, at, seal in saved]


def _newest(states: list[MemberState]) -> list[MemberState]:
    """One state per member: the newest (by generation, then heartbeat)."""
    best: dict[str, MemberState] = {}
    for state in states:
        if state.id not in best or state.version > best[state.id].version:
            best[state.id] = state
    return list(best.values())
