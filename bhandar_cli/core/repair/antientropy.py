"""Anti-entropy: Merkle-tree repair sessions between replicas, in the background and on command.

A session compares one keyspace's token range (lo, hi] between this node (the initiator) and one
other replica. Both read the range's Merkle tree from their hash index (hash_index.py, kept up to
date by every write: nothing is built or scanned per session); the initiator sends hashes level by
level and descends only where they differ; at the leaves the peer sends its (key, digest) pairs of
the differing leaves only. The initiator then fetches the peer's records of exactly the differing
keys in bounded batches (repair_transfer.py), merges them with its own, stores the result, and
pushes the merged records back. When every push is acknowledged both replicas hold the merge of
both for every key of the range, which is what lets the tombstone reaper (reaping.py) count the
peer as holding this node's tombstones.

Background repair compares every range shared with one peer per repair interval, a bounded
number at once, hurried when there is something to repair (repair_schedule.py); at most
BACKGROUND_TRANSFERS of its sessions fetch and push records at once (the others that found
differences wait their turn), so background repair holds no more records in flight than that.
Storage damage asks for comparisons at once (`repair_ranges`); the keyspaces they cover stay
unrepaired (unrepaired.py: this node answers no read there) until each of them ended well with
every other replica that is still a member.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bhandar_cli.core.membership import RingView
from bhandar_cli.core.model import (
    KeyspaceDef,
    Keyspaces,
    NodeConfig,
    NodeMetrics,
    Record,
    SiblingLimit,
    Store,
    merge_records,
)
from bhandar_cli.core.protocol import Effect, IdSource, RepairResult, Send, answer
from bhandar_cli.core.repair.hash_index import HashIndex
from bhandar_cli.core.repair.merkle import HashProbe, ProbeReply
from bhandar_cli.core.repair.merkle_diff import DiffSession
from bhandar_cli.core.repair.range_tree import RangeTree
from bhandar_cli.core.repair.reaping import TombstoneReaper
from bhandar_cli.core.repair.repair_schedule import Comparison, RepairSchedule, ReplicatedRange
from bhandar_cli.core.repair.repair_transfer import KeyTransfer, fitting
from bhandar_cli.core.repair.unrepaired import Unrepaired

RangeKey = tuple[str, int, int]  # (keyspace, lo, hi)
URGENT = -1  # the batch of the comparisons `repair_ranges` starts (0: background, >0: commands)
BACKGROUND_TRANSFERS = 4  # background sessions in their transfer phase at once (each: WINDOW fetches)


@dataclass(frozen=True, slots=True)
class RepairProbe:
    session: int
    keyspace: KeyspaceDef
    probe: HashProbe


@dataclass(frozen=True, slots=True)
class RepairProbeReply:
    session: int
    level: int
    differing: tuple[int, ...]
    leaves: tuple[tuple[int, tuple[tuple[str, bytes], ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class RepairFetch:
    session: int
    keyspace: KeyspaceDef
    keys: tuple[str, ...]
    batch: int = 0  # which of the session's fetches: the reply names it


@dataclass(frozen=True, slots=True)
class RepairFetchReply:
    session: int
    records: tuple[tuple[str, Record | None], ...]
    more: tuple[str, ...] = ()  # keys asked for but left to a later fetch (the reply was full)
    batch: int = 0


@dataclass(frozen=True, slots=True)
class RepairPush:
    session: int
    keyspace: KeyspaceDef
    records: tuple[tuple[str, Record], ...]
    batch: int = 0  # which of the session's pushes: the acknowledgement names it


@dataclass(frozen=True, slots=True)
class RepairDone:
    session: int
    batch: int = 0


@dataclass
class RepairSession:
    """One comparison this node initiated."""

    id: int
    peer: str
    keyspace: KeyspaceDef
    lo: int
    hi: int
    deadline: float
    diff: DiffSession
    phase: str = "probe"  # probe, then transfer (background: maybe "waiting" for a transfer slot first)
    keys: tuple[str, ...] = ()
    transfer: KeyTransfer = field(default_factory=KeyTransfer)
    batch: int = 0  # the `repair` command this session belongs to, 0 for background
    equal: bool = True
    tombstones: dict[str, bytes] = field(default_factory=dict)  # key -> digest when the session began


@dataclass
class RepairBatch:
    """A `repair` command in progress: answers the client when its sessions are all done."""

    rid: int
    origin: str | None
    pending: set[int] = field(default_factory=set)
    ranges: int = 0
    differing: int = 0
    keys: int = 0
    failed: list[str] = field(default_factory=list)


class AntiEntropy:
    """Initiator and responder sides of repair sessions; `repair` commands; background repair."""

    def __init__(
        self,
        node_id: str,
        config: NodeConfig,
        store: Store,
        index: HashIndex,
        keyspaces: Keyspaces,
        ring_view: RingView,
        ids: IdSource,
        reaper: TombstoneReaper,
        metrics: NodeMetrics,
        first_round: float,
        sibling_limit: SiblingLimit,
        unrepaired: Unrepaired,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.store = store
        self.index = index
        self.keyspaces = keyspaces
        self.ring_view = ring_view
        self.ids = ids
        self.reaper = reaper
        self.metrics = metrics
        self.sibling_limit = sibling_limit  # merges keep every sibling, over the limit or not
        self._sessions: dict[int, RepairSession] = {}
        self._batches: dict[int, RepairBatch] = {}
        self._last_repair: dict[RangeKey, float] = {}
        self._urgent: list[tuple[KeyspaceDef, int, int, str]] = []  # repair_ranges' waiting for a peer
        self._waiting: list[int] = []  # background sessions that found differences, waiting to transfer
        self.unrepaired = unrepaired
        self._resumed = not unrepaired.keyspaces  # a past life's damage: its comparisons start again
        self._schedule = RepairSchedule(config, ring_view, self.replicated_ranges, first_round)

    # --- what to compare --------------------------------------------------------------------

    def replicated_ranges(self) -> list[ReplicatedRange]:
        """(keyspace, lo, hi, other replicas) for every range this node replicates."""
        out: list[ReplicatedRange] = []
        ring = self.ring_view.ring
        if not len(ring):
            return out
        for ks in sorted(self.keyspaces.all(), key=lambda k: k.name):
            for rng in ring.ranges():
                prefs = ring.preference_list(rng.hi, ks.n)
                if self.node_id in prefs:
                    out.append((ks, rng.lo, rng.hi, tuple(p for p in prefs if p != self.node_id)))
        return out

    def repair_ages(self, now: float) -> dict[str, float | None]:
        """Seconds since each replicated range was last repaired (None: never)."""
        ages: dict[str, float | None] = {}
        for ks, lo, hi, _ in self.replicated_ranges():
            last = self._last_repair.get((ks.name, lo, hi))
            ages[f"{ks.name}:({lo},{hi}]"] = None if last is None else round(now - last, 3)
        return ages

    # --- initiator ---------------------------------------------------------------------------

    def repair_now(self, now: float, rid: int, origin: str | None, keyspace: str | None) -> list[Effect]:
        """The `repair` command: compare every range this node replicates (of `keyspace`, or all)
        with each other replica that is up; answer client `rid` when every comparison ended."""
        batch_id = self.ids.take()
        batch = RepairBatch(rid, origin)
        self._batches[batch_id] = batch
        out: list[Effect] = []
        skipped: dict[str, int] = {}
        for ks, lo, hi, peers in self.replicated_ranges():
            if keyspace is not None and ks.name != keyspace:
                continue
            for peer in peers:
                if self.ring_view.is_up(peer, now):
                    out.extend(self._start(now, ks, lo, hi, peer, batch_id))
                else:
                    skipped[peer] = skipped.get(peer, 0) + 1
        batch.failed.extend(
            f"{peer} is down: {n} range comparisons skipped" for peer, n in sorted(skipped.items())
        )
        if not batch.pending:
            out.extend(self._finish_batch(batch_id, batch))
        return out

    def repair_ranges(self, now: float, ranges: list[ReplicatedRange]) -> list[Effect]:
        """Compare these ranges with each of their other replicas now, not in the background
        round: this node lost records there (storage damage). Comparisons with a peer that is
        not up wait for it, and failed ones are tried again, at every tick while it is a member.
        Their keyspaces are unrepaired until then."""
        self._urgent.extend((ks, lo, hi, peer) for ks, lo, hi, peers in ranges for peer in peers)
        self.unrepaired.add(ks.name for ks, _, _, peers in ranges if peers)
        return self._start_urgent(now)

    def _settle(self) -> None:
        """A keyspace is repaired once no comparison `repair_ranges` asked for waits or runs."""
        if self.unrepaired.keyspaces:
            pending = {ks.name for ks, _, _, _ in self._urgent}
            pending.update(s.keyspace.name for s in self._sessions.values() if s.batch == URGENT)
            self.unrepaired.settle(pending)

    def _resume(self, now: float) -> list[Effect]:
        """After a restart, compare again the keyspaces a past life left unrepaired."""
        self._resumed = True
        ranges = [r for r in self.replicated_ranges() if r[0].name in self.unrepaired]
        self._urgent.extend((ks, lo, hi, peer) for ks, lo, hi, peers in ranges for peer in peers)
        return self._start_urgent(now)

    def _start_urgent(self, now: float) -> list[Effect]:
        out: list[Effect] = []
        waiting = []
        members = set(self.ring_view.peers())
        for ks, lo, hi, peer in self._urgent:
            if self.ring_view.is_up(peer, now):
                out.extend(self._start(now, ks, lo, hi, peer, URGENT))
            elif peer in members:
                waiting.append((ks, lo, hi, peer))
        self._urgent = waiting
        self._settle()  # a comparison with a peer no longer a member is dropped
        return out

    def next_deadline(self) -> float:
        """When the next background comparison is due (inf when background repair is off)."""
        return self._schedule.next_deadline()

    def tick(self, now: float) -> list[Effect]:
        """Start the comparisons `repair_ranges` left waiting for their peer; and when the
        schedule says so (repair_schedule.py), the next peer's background comparisons."""
        if not self._resumed and len(self.ring_view.ring):  # (with no ring yet, no range is known)
            return self._resume(now)
        if self._urgent and (started := self._start_urgent(now)):
            return started
        if not self._schedule.due(now) or self._background_in_flight():
            return []
        return self._start_background(now, self._schedule.start(now, 0))

    def _background_in_flight(self) -> int:
        return sum(1 for s in self._sessions.values() if s.batch == 0)

    def _start_background(self, now: float, comparisons: list[Comparison]) -> list[Effect]:
        out: list[Effect] = []
        for comparison in comparisons:
            out.extend(self._start(now, *comparison, 0))
        return out

    def expire(self, now: float) -> list[Effect]:
        """End the sessions whose peer did not answer in time."""
        out: list[Effect] = []
        for session in [s for s in self._sessions.values() if s.deadline <= now]:
            out.extend(self._end_session(now, session, f"no answer from {session.peer} in time"))
        return out

    def _start(self, now: float, ks: KeyspaceDef, lo: int, hi: int, peer: str, batch_id: int) -> list[Effect]:
        session_id = self.ids.take()
        hashes = self.index.space(ks.name)
        diff = DiffSession(RangeTree(hashes, lo, hi, self.config.merkle_depth))
        tombstones = hashes.tombstones(lo, hi)
        deadline = now + self.config.request_timeout * 4
        self._sessions[session_id] = RepairSession(
            session_id, peer, ks, lo, hi, deadline, diff, batch=batch_id, tombstones=tombstones
        )
        batch = self._batches.get(batch_id)
        if batch is not None:
            batch.pending.add(session_id)
        self.metrics.repair_sessions += 1
        return [Send(peer, RepairProbe(session_id, ks, diff.start()))]

    def on_probe_reply(self, now: float, src: str, msg: RepairProbeReply) -> list[Effect]:
        session = self._sessions.get(msg.session)
        if session is None or session.peer != src or session.phase != "probe":
            return []
        reply = ProbeReply(msg.level, msg.differing, {i: dict(pairs) for i, pairs in msg.leaves})
        try:
            probe = session.diff.receive(reply)
        except ValueError as exc:
            return self._end_session(now, session, f"bad reply from {src}: {exc}")
        if probe is not None:
            return [Send(src, RepairProbe(session.id, session.keyspace, probe))]
        session.keys = session.diff.result().keys
        if not session.keys:
            return self._end_session(now, session)
        session.equal = False
        transferring = sum(1 for s in self._sessions.values() if s.batch == 0 and s.phase == "transfer")
        if session.batch == 0 and transferring >= BACKGROUND_TRANSFERS:
            session.phase = "waiting"
            session.deadline = float("inf")  # nothing asked of the peer yet: it cannot be late
            self._waiting.append(session.id)
            return []
        return self._transfer(now, session)

    def _transfer(self, now: float, session: RepairSession) -> list[Effect]:
        session.phase = "transfer"
        session.transfer.waiting.extend(session.keys)
        self.metrics.keys_repaired += len(session.keys)
        return self._fetch_more(now, session)

    def _fetch_more(self, now: float, session: RepairSession) -> list[Effect]:
        session.deadline = now + self.config.request_timeout * 4  # progress: a long transfer may go on
        ks = session.keyspace
        fetches = session.transfer.next_fetches()
        return [Send(session.peer, RepairFetch(session.id, ks, keys, batch)) for batch, keys in fetches]

    def on_fetch_reply(self, now: float, src: str, msg: RepairFetchReply) -> list[Effect]:
        session = self._sessions.get(msg.session)
        if session is None or session.peer != src or not session.transfer.fetched(msg.batch, msg.more):
            return []
        ks = session.keyspace
        pushes: list[tuple[str, Record]] = []
        for key, theirs in msg.records:
            mine = self.store.get(ks.name, key)
            merged = merge_records(ks.policy, mine, theirs)
            if merged is None or (mine is None and self.reaper.already_reaped(ks.name, key, merged)):
                continue
            if merged != mine:
                self.store.put(ks.name, key, merged)
                self.sibling_limit.stored(ks.name, key, merged)
            if merged != theirs:
                pushes.append((key, merged))
        out = self._fetch_more(now, session)
        while pushes:
            n = fitting(pushes)
            push = RepairPush(session.id, ks, tuple(pushes[:n]), session.transfer.push())
            out.append(Send(src, push, durable=True))
            pushes = pushes[n:]
        if session.transfer.done:
            out.extend(self._end_session(now, session))
        return out

    def on_done(self, now: float, src: str, msg: RepairDone) -> list[Effect]:
        session = self._sessions.get(msg.session)
        if session is None or session.peer != src or not session.transfer.pushed(msg.batch):
            return []
        session.deadline = now + self.config.request_timeout * 4
        return self._end_session(now, session) if session.transfer.done else []

    def _end_session(self, now: float, session: RepairSession, error: str = "") -> list[Effect]:
        self._sessions.pop(session.id, None)
        if session.id in self._waiting:
            self._waiting.remove(session.id)
        out: list[Effect] = []
        if not error:
            self._last_repair[(session.keyspace.name, session.lo, session.hi)] = now
            self.reaper.confirm(now, session.keyspace, session.hi, session.peer, session.tombstones)
            if session.batch == URGENT:
                self._settle()
        elif session.batch == URGENT:  # records were lost here: try again (at the next tick)
            self._urgent.append((session.keyspace, session.lo, session.hi, session.peer))
        if session.batch == 0:
            if session.phase == "transfer" and self._waiting:  # its transfer slot goes to the next
                out.extend(self._transfer(now, self._sessions[self._waiting.pop(0)]))
            later = self._schedule.ended(not session.equal, now, self._background_in_flight())
            out.extend(self._start_background(now, later))
        batch = self._batches.get(session.batch)
        if batch is not None:
            batch.pending.discard(session.id)
            batch.ranges += 1
            batch.differing += 0 if session.equal else 1
            batch.keys += len(session.keys)
            if error:
                batch.failed.append(f"{session.peer}: {error}")
            if not batch.pending:
                out.extend(self._finish_batch(session.batch, batch))
        return out

    def _finish_batch(self, batch_id: int, batch: RepairBatch) -> list[Effect]:
        self._batches.pop(batch_id, None)
        result = RepairResult(self.node_id, batch.ranges, batch.differing, batch.keys, tuple(batch.failed))
        return [answer(batch.rid, batch.origin, result, durable=True)]

    # --- responder ---------------------------------------------------------------------------

    def on_probe(self, now: float, src: str, msg: RepairProbe) -> list[Effect]:
        self.keyspaces.learn(msg.keyspace)
        probe = msg.probe
        try:
            tree = RangeTree(self.index.space(msg.keyspace.name), probe.lo, probe.hi, probe.depth)
            reply = tree.answer(probe)
        except ValueError:
            return []
        leaves = tuple((i, tuple(sorted(entries.items()))) for i, entries in sorted(reply.leaves.items()))
        return [Send(src, RepairProbeReply(msg.session, reply.level, reply.differing, leaves))]

    def on_fetch(self, now: float, src: str, msg: RepairFetch) -> list[Effect]:
        records = [(key, self.store.get(msg.keyspace.name, key)) for key in msg.keys]
        n = fitting(records)
        return [Send(src, RepairFetchReply(msg.session, tuple(records[:n]), msg.keys[n:], msg.batch))]

    def on_push(self, now: float, src: str, msg: RepairPush) -> list[Effect]:
        self.keyspaces.learn(msg.keyspace)
        for key, record in msg.records:
            mine = self.store.get(msg.keyspace.name, key)
            if mine is None and self.reaper.already_reaped(msg.keyspace.name, key, record):
                continue  # we reaped this tombstone already: do not let repair bring it back
            merged = merge_records(msg.keyspace.policy, mine, record)
            if merged is not None:
                self.store.put(msg.keyspace.name, key, merged)
                self.sibling_limit.stored(msg.keyspace.name, key, merged)
        return [Send(src, RepairDone(msg.session, msg.batch), durable=True)]
