"""Gossip membership with phi-accrual failure detection (Cassandra's design, on a small scale).

Every interval a node bumps its own heartbeat and sends its whole membership table to a few random
live peers (plus, sometimes, one that looks down, and a seed), who merge it and answer with the
states of theirs that the sender lacks or holds older (push-pull). The node's keyspace
definitions and token table (core/model/access_tokens.py) ride along: the syn names its table's version; the
ack carries the whole table only when that version differs from its own, and the syn's sender
pushes its table back (`GossipTokens`) only when the ack's version still differs after merging.
Seeing a peer's heartbeat go up feeds that peer's phi detector; a peer whose phi passes the
threshold is down *for routing only*: ownership never changes because of it.

Every fact is checked for its author before it is merged (core/membership/authorship.py): a
member's state only as that member said it, token records and removals only as an issuer did.
Refusals are counted (`refused`, in `info`) and noted once per sender.

It implements the `Liveness` interface, so the rest of the node does not know gossip from pings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from random import Random
from typing import Any

from bhandar_cli.core.membership.authorship import TRUST_ALL, Authorship, Removal
from bhandar_cli.core.membership.member_row import MemberRow
from bhandar_cli.core.membership.members import Membership, MemberState
from bhandar_cli.core.membership.phi import PhiConfig, PhiDetectors
from bhandar_cli.core.model import TokenRecord, TokenTable
from bhandar_cli.core.protocol import Effect, Note, Send


@dataclass(frozen=True, slots=True)
class GossipSyn:
    members: tuple[MemberState, ...]
    schema: tuple[Any, ...] = ()  # keyspace definitions travel with membership
    client_tokens_version: int = 0  # the sender's token table, by version
    sent: float | None = None  # protocol 2: the sender's clock, given back in the ack (round trip)
    removals: tuple[Removal, ...] = ()  # protocol 5: every removal the sender knows (few, ever)
    schema_seals: tuple[Any, ...] = ()  # protocol 5: issuers' seals of `schema`'s definitions


@dataclass(frozen=True, slots=True)
class GossipAck:
    members: tuple[MemberState, ...]
    schema: tuple[Any, ...] = ()
    client_tokens_version: int = 0  # the table before merging the syn's sender's
    client_tokens: tuple[Any, ...] = ()  # the whole table, only when the syn's version differed
    echo: float | None = None  # protocol 2: the syn's `sent`, for its sender's round-trip time
    removals: tuple[Removal, ...] = ()  # protocol 5: the removals the syn's sender lacks
    schema_seals: tuple[Any, ...] = ()  # protocol 5: issuers' seals of `schema`'s definitions


@dataclass(frozen=True, slots=True)
class GossipTokens:
    """The token table of an ack's receiver whose table the ack's sender lacks part of."""

    client_tokens: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Goodbye:
    """Protocol 2: the sender is stopping cleanly (its life of `generation` ends). Its peers call
    it down at once, so writes meant for it become hints instead of messages to nobody until the
    failure detector notices; its next life (a higher generation) is up again."""

    generation: int


class GossipLiveness:
    """Membership plus who is up, kept by gossip."""

    def __init__(
        self,
        me: MemberState,
        known: Iterable[MemberState],
        seeds: Iterable[str],
        now: float,
        rng: Random,
        interval: float = 0.5,
        fanout: int = 2,
        phi: PhiConfig | None = None,
        schema: Callable[[], tuple[Any, ...]] = tuple,
        on_schema: Callable[[tuple[Any, ...], tuple[Any, ...]], None] = lambda _schema, _seals: None,
        schema_seals: Callable[[], tuple[Any, ...]] = tuple,
        client_tokens: TokenTable | None = None,
        authority: Authorship = TRUST_ALL,
        removals: Iterable[Removal] = (),
    ) -> None:
        self.me = me.id
        self.membership = Membership(me, known)
        self.authority = authority
        # Issuers' removals this node knows (the driver persists them): they travel with every syn.
        self.removals: dict[str, Removal] = {}
        for removal in removals:
            self._apply_removal(removal)
        self._sealed: MemberState | None = None  # this node's state as last sealed
        # Facts refused for their author, by reason, and the senders already noted (once each).
        self.refused: dict[str, int] = {}
        self._noted_refusals: set[tuple[str, str]] = set()
        self.rng = rng
        self.interval = interval
        self.fanout = fanout
        self.phi = PhiDetectors(phi or PhiConfig(first_heartbeat_estimate=interval))
        # Seeds are contact points: node ids, or "host:port" addresses for nodes that know only
        # where to find the cluster (the network resolves either).
        self.seeds = [s for s in seeds if s not in (me.id, me.address)]
        # The node's keyspace definitions ride along, so a node that missed a schema broadcast
        # (partitioned, or joining later) still learns every keyspace.
        self.schema = schema
        self.on_schema = on_schema
        self.schema_seals = schema_seals
        self.client_tokens = client_tokens
        self._next = now
        self._was_up: dict[str, bool] = {}
        # What `_transitions` must look at next: with the same members, only the peers whose state
        # or heartbeats came in since (`_touched`), until the first moment an untouched peer's
        # silence can make it down (`_recheck_at`). A merge of a 240-member table otherwise asked
        # every peer's detector on every message, which made gossip cost O(n) per peer per message.
        self._touched: set[str] = set()
        self._recheck_at = -math.inf
        self._scanned_version = -1
        # Members whose state reached this node during this life (directly or second-hand): their
        # addresses are current. Entries only loaded from the saved table may be stale.
        self.heard: set[str] = set()
        # Round-trip time to each peer, from its last ack to one of our syns (protocol 2 peers
        # only: a version-1 ack carries no echo).
        self.rtt: dict[str, float] = {}
        # Peers that said goodbye, with the generation whose life ended: down until a later one.
        self.departed: dict[str, int] = {}
        for peer in self.membership.peers():
            self.phi.heartbeat(peer, now)  # start every clock: silence from now on counts

    # --- Liveness interface --------------------------------------------------------------------

    def is_up(self, peer: str, now: float) -> bool:
        if peer == self.me:
            return True
        state = self.membership.members.get(peer)
        if state is None or state.status == "left":
            return False
        gone = self.departed.get(peer)
        if gone is not None and state.generation <= gone:
            return False
        return self.phi.is_up(peer, now)

    def heard_from(self, peer: str, now: float) -> None:
        """Only gossip heartbeats count (a message may be old news delivered late)."""

    def retune_detectors(self, threshold: float, pause: float, first_estimate: float) -> None:
        """New failure-detector tuning (a configuration change): every peer is looked at again on
        the next message, since a lower threshold can make a silent peer down sooner."""
        self.phi.retune(threshold, pause, first_estimate)
        self._recheck_at = -math.inf

    def add_peer(self, peer: str, now: float) -> None:
        if peer not in self.phi:
            self.phi.heartbeat(peer, now)
            self._touched.add(peer)

    def next_deadline(self) -> float:
        return self._next

    def handle(self, now: float, src: str, msg: object) -> list[Effect] | None:
        if isinstance(msg, GossipSyn):
            self.on_schema(msg.schema, msg.schema_seals)
            out = self._merge_removals(src, msg.removals)
            out += self._merge(now, src, msg.members)
            version = self._client_tokens_version()
            table: tuple[TokenRecord, ...] = ()
            if self.client_tokens is not None and msg.client_tokens_version != version:
                table = self.client_tokens.records()
            newer = self._newer_than(msg.members)
            theirs = {r.node for r in msg.removals}
            lacking = tuple(r for n, r in sorted(self.removals.items()) if n not in theirs)
            ack = GossipAck(newer, self.schema(), version, table, msg.sent, lacking, self.schema_seals())
            out.append(Send(src, ack))
            return out
        if isinstance(msg, GossipAck):
            if msg.echo is not None and 0.0 <= now - msg.echo < 60.0:
                self.rtt[src] = now - msg.echo
            self.on_schema(msg.schema, msg.schema_seals)
            out = self._merge_removals(src, msg.removals)
            out += self._merge(now, src, msg.members)
            if self.client_tokens is not None:
                self._merge_tokens(src, msg.client_tokens, out)
                if self.client_tokens.version != msg.client_tokens_version:  # the peer lacks some of ours
                    out.append(Send(src, GossipTokens(self.client_tokens.records())))
            return out
        if isinstance(msg, Goodbye):
            state = self.membership.members.get(src)
            if state is not None and msg.generation >= state.generation:
                self.departed[src] = msg.generation
                self._touched.add(src)
            return self._transitions(now)
        if isinstance(msg, GossipTokens):
            out = []
            if self.client_tokens is not None:
                self._merge_tokens(src, msg.client_tokens, out)
            return out
        return None

    def tick(self, now: float) -> list[Effect]:
        if now < self._next:
            return []
        self._next = now + self.interval
        self.membership.update_mine()
        removals = tuple(r for _, r in sorted(self.removals.items()))
        digest = GossipSyn(
            self.digest(), self.schema(), self._client_tokens_version(), now, removals, self.schema_seals()
        )
        out: list[Effect] = [Send(peer, digest) for peer in self._targets(now)]
        out.extend(self._transitions(now))
        return out

    # --- gossip ----------------------------------------------------------------------------------

    def goodbye(self) -> Goodbye:
        """What this node tells its peers when it stops cleanly."""
        return Goodbye(self.membership.members[self.me].generation)

    def digest(self) -> tuple[MemberState, ...]:
        """Every member's state as this node sends it (its own sealed)."""
        mine = self._sealed_mine()
        return tuple(mine if s.id == self.me else s for s in self.membership.members.values())

    def _sealed_mine(self) -> MemberState:
        """This node's state sealed, once per version (a seal is a signature: not free)."""
        mine = self.membership.mine
        sealed = self._sealed
        if sealed is None or sealed.version != mine.version:  # every change of it bumps the version
            sealed = self._sealed = self.authority.seal_member(mine)
        return sealed

    # --- who may say what (core/membership/authorship.py) ----------------------------------------

    def remove(self, node: str, now: float) -> Removal:
        """Remove `node` from the cluster for good (`cluster remove`, an admin asked this node):
        sealed here, so this node must be an issuer (Refused otherwise); gossip spreads it."""
        removal = self.authority.seal_removal(Removal(node, now))
        self._apply_removal(removal)
        return removal

    def _apply_removal(self, removal: Removal) -> bool:
        if removal.node in self.removals:
            return False
        self.removals[removal.node] = removal
        self.membership.remove(removal.node)
        return True

    def _merge_removals(self, src: str, removals: Iterable[Removal]) -> list[Effect]:
        out: list[Effect] = []
        for removal in removals:
            if not isinstance(removal, Removal) or removal.node in self.removals:
                continue
            why = self.authority.admits_removal(removal)
            if why is not None:
                self._refuse(src, "removal", f"a removal of {removal.node}: {why}", out)
                continue
            self._apply_removal(removal)
            self._touched.add(removal.node)
            out.append(
                Note(
                    f"{self.me} learned that {removal.node} was removed",
                    {"node": self.me, "removed": removal.node},
                )
            )
        return out

    def _merge_tokens(self, src: str, records: tuple[Any, ...], out: list[Effect]) -> None:
        assert self.client_tokens is not None
        before = self.client_tokens.refused
        self.client_tokens.merge(records)
        if self.client_tokens.refused != before:
            self._refuse(src, "token", self.client_tokens.last_refusal, out)

    def _refuse(self, src: str, kind: str, why: str, out: list[Effect]) -> None:
        """Count a fact refused for its author; a person hears of the first from each sender."""
        self.refused[kind] = self.refused.get(kind, 0) + 1
        if (src, kind) not in self._noted_refusals:
            self._noted_refusals.add((src, kind))
            text = f"{self.me} refused gossip from {src}: {why}"
            out.append(Note(text, {"node": self.me, "peer": src, "refused": kind}))

    def _newer_than(self, theirs: Iterable[MemberState]) -> tuple[MemberState, ...]:
        """The states of this table that a syn's sender, which sent `theirs` (its whole table),
        lacks or holds older. The rest it would merge and drop, so the ack leaves them out: that
        halves the bytes of an ack in a steady cluster and changes nothing a merge does (and a
        peer of any version reads a shorter member list as it reads a full one)."""
        held = {state.id: state.version for state in theirs}
        none = (-1, -1)
        # From the digest: this node's own state goes sealed, as in a syn (an ack that carried it
        # unsealed had every peer refuse it second-hand: "an unsealed state relayed by ...").
        return tuple(s for s in self.digest() if held.get(s.id, none) < s.version)

    def _client_tokens_version(self) -> int:
        return 0 if self.client_tokens is None else self.client_tokens.version

    def set_status(self, status: str) -> MemberState:
        """Announce a new status of this node (joining -> normal, normal -> leaving -> left)."""
        return self.membership.update_mine(status=status)

    def _targets(self, now: float) -> list[str]:
        peers = self.membership.peers()
        live = [p for p in peers if self.is_up(p, now)]
        down = [p for p in peers if p not in live]
        chosen = self.rng.sample(live, min(self.fanout, len(live)))
        # Sometimes talk to a peer that looks down: that is how a returning node is noticed.
        if down and self.rng.random() < len(down) / (len(live) + 1):
            chosen.append(self.rng.choice(down))
        # And to a seed now and then, so separate groups of nodes find each other.
        seeds = [s for s in self.seeds if s not in chosen]
        if seeds and (not chosen or self.rng.random() < 0.2):
            chosen.append(self.rng.choice(seeds))
        return chosen

    def _merge(self, now: float, src: str, members: Iterable[MemberState]) -> list[Effect]:
        refusals: list[Effect] = []
        for state in members:
            # Checked only when it would be taken (a newer version: each is checked once). A state of
            # this node itself counts too: a newer one would make it start a later generation.
            if state.id not in self.membership.removed:
                old_state = self.membership.members.get(state.id)
                if old_state is None or state.version > old_state.version:
                    why = self.authority.admits_member(state, src)
                    if why is not None:
                        self._refuse(src, "member", f"a state of {state.id}: {why}", refusals)
                        continue
            taken, old = self.membership.merge(state)
            if not taken:
                continue
            self.heard.add(state.id)
            self._touched.add(state.id)
            if old is None or old.generation != state.generation:
                self.phi.reset(state.id, now)  # a new node, or a restart: a fresh history
            else:
                self.phi.heartbeat(state.id, now)
        return refusals + self._transitions(now)

    def _transitions(self, now: float) -> list[Effect]:
        """Notes for a person watching: a peer went down or came back, in this node's eyes."""
        out: list[Effect] = []
        members = self.membership
        full = members.version != self._scanned_version or now >= self._recheck_at
        if full:
            peers = members.peers()
            self._scanned_version, self._recheck_at = members.version, math.inf
        else:  # the same peers as the last scan: only a touched one can have changed
            peers = sorted(p for p in self._touched if p in self._was_up)
        self._touched.clear()
        # A node that has left the cluster hears from no one, so it comes to call every peer down:
        # that is no news about them, and a person watching would read it as an outage.
        left = members.members[self.me].status == "left"
        for peer in peers:
            up = self.is_up(peer, now)
            before = self._was_up.get(peer)
            if before is not None and before != up and not left:
                word = "up" if up else "down"
                out.append(Note(f"{self.me} sees {peer} {word}", {"node": self.me, "peer": peer, "up": up}))
            self._was_up[peer] = up
            if up:  # a peer that is down comes back only by a message, which touches it
                self._recheck_at = min(self._recheck_at, self.phi.down_at(peer))
        return out

    def view(self, now: float) -> list[MemberRow]:
        """This node's membership view (the `members` command)."""
        rows: list[MemberRow] = []
        for mid, state in sorted(self.membership.members.items()):
            detector = None if mid == self.me else self.phi.detector(mid)
            last = None if detector is None else detector.last_heartbeat
            rows.append(
                {
                    "id": mid,
                    "zone": state.zone,
                    "generation": state.generation,
                    "heartbeat": state.heartbeat,
                    "status": state.status,
                    "up": self.is_up(mid, now),
                    "phi": 0.0 if mid == self.me else round(min(self.phi.phi(mid, now), 1e6), 3),
                    "tokens": len(state.tokens),
                    "address": state.address,
                    "heard": mid == self.me or mid in self.heard,
                    "rtt_ms": round(self.rtt[mid] * 1000.0, 3) if mid in self.rtt else None,
                    # Why this node calls the member up or down: how long it has heard nothing of
                    # it, and after how much silence its detector calls it down (None: itself, or
                    # never heard from).
                    "silent_s": None if last is None else round(now - last, 3),
                    "down_after_s": None if last is None else round(self.phi.down_at(mid) - last, 3),
                    "removed": mid in self.removals,
                }
            )
        # A member removed before this node heard of it is still out: said, so screens agree.
        for mid in sorted(set(self.removals) - set(self.membership.members)):
            rows.append(
                {
                    "rtt_ms": None, "silent_s": None, "down_after_s": None,
                    "id": mid, "zone": "", "generation": 0, "heartbeat": 0, "status": "left",
                    "up": False, "phi": 0.0, "tokens": 0, "address": "", "heard": False, "removed": True,
                }
            )  # fmt: skip
        return rows
