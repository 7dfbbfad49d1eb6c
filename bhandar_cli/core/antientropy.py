"""Anti-entropy: Merkle-tree repair sessions between replicas, and safe tombstone reaping.

A session compares one keyspace's token range (lo, hi] between this node (the initiator) and one
other replica. Both build a Merkle tree of the range; the initiator sends hashes level by level and
descends only where they differ; at the leaves the peer sends its (key, digest) pairs of the
differing leaves only. The initiator then fetches the peer's records of exactly the differing keys,
merges them with its own, stores the result, and pushes the merged records back. When the push is
acknowledged both replicas hold the merge of both for every key of the range.

That acknowledgement is what makes reaping safe: a session confirms, for every tombstone this node
held when it began, that the peer now holds it too (or something newer). A tombstone is removed
only after the grace period *and* once every other replica of its range is confirmed to hold it,
so no replica can still hold the value it deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bhandar_cli.core.config import KeyspaceDef
from bhandar_cli.core.merkle import HashProbe, MerkleTree, ProbeReply
from bhandar_cli.core.merkle_diff import DiffSession
from bhandar_cli.core.messages import Effect, Send
from bhandar_cli.core.node_base import NodeBase
from bhandar_cli.core.record_digest import digest
from bhandar_cli.core.records import Record, Versioned, merge_records
from bhandar_cli.core.ring import key_token

RangeKey = tuple[str, int, int]  # (keyspace, lo, hi)


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


@dataclass(frozen=True, slots=True)
class RepairFetchReply:
    session: int
    records: tuple[tuple[str, Record | None], ...]


@dataclass(frozen=True, slots=True)
class RepairPush:
    session: int
    keyspace: KeyspaceDef
    records: tuple[tuple[str, Record], ...]


@dataclass(frozen=True, slots=True)
class RepairDone:
    session: int


@dataclass
class RepairSession:
    """One comparison this node initiated."""

    id: int
    peer: str
    keyspace: KeyspaceDef
    lo: int
    hi: int
    started: float
    deadline: float
    diff: DiffSession
    phase: str = "probe"  # probe, fetch, push
    keys: tuple[str, ...] = ()
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


class RepairRole(NodeBase):
    """Initiator and responder sides of anti-entropy, and tombstone reaping."""

    repairs: dict[int, RepairSession]
    repair_batches: dict[int, RepairBatch]
    last_repair: dict[RangeKey, float]
    confirmed: dict[tuple[str, str], tuple[bytes, set[str]]]  # tombstone -> (digest, peers holding it)
    reaped: dict[tuple[str, str], float]  # tombstones removed here -> their newest timestamp
    _repair_queue: list[tuple[KeyspaceDef, int, int, str]]
    _next_repair: float

    # --- what to compare --------------------------------------------------------------------

    def replicated_ranges(self) -> list[tuple[KeyspaceDef, int, int, tuple[str, ...]]]:
        """(keyspace, lo, hi, other replicas) for every range this node replicates."""
        out = []
        ring = self.ring
        if not len(ring):
            return out
        for ks in sorted(self.keyspaces.values(), key=lambda k: k.name):
            for rng in ring.ranges():
                prefs = ring.preference_list(rng.hi, ks.n)
                if self.id in prefs:
                    out.append((ks, rng.lo, rng.hi, tuple(p for p in prefs if p != self.id)))
        return out

    def build_tree(self, keyspace: str, lo: int, hi: int, depth: int) -> tuple[MerkleTree, dict[str, bytes]]:
        """The range's Merkle tree, and the tombstones in it (key -> digest)."""
        tree = MerkleTree(lo, hi, depth)
        tombstones: dict[str, bytes] = {}
        store = self.store
        # Hash every key (cheap) but read only the records of this range: a range is a small
        # slice of the keyspace, and decoding every record for each comparison was the cost.
        for key in store.keys(keyspace):
            token = key_token(keyspace, key)
            if tree.contains(token):
                record = store.get(keyspace, key)
                if record is None:
                    continue
                d = digest(record)
                tree.update(token, key, d)
                if _is_tombstone(record):
                    tombstones[key] = d
        return tree, tombstones

    # --- initiator ---------------------------------------------------------------------------

    def start_repair(
        self, now: float, ks: KeyspaceDef, lo: int, hi: int, peer: str, batch: int = 0
    ) -> list[Effect]:
        session_id = self._next_op
        self._next_op += 1
        tree, tombstones = self.build_tree(ks.name, lo, hi, self.config.merkle_depth)
        diff = DiffSession(tree)
        deadline = now + self.config.request_timeout * 4
        self.repairs[session_id] = RepairSession(
            session_id, peer, ks, lo, hi, now, deadline, diff, batch=batch, tombstones=tombstones
        )
        self.metrics.repair_sessions += 1
        probe = diff.start()
        return [Send(peer, RepairProbe(session_id, ks, probe))]

    def _on_probe_reply(self, now: float, src: str, msg: RepairProbeReply) -> list[Effect]:
        session = self.repairs.get(msg.session)
        if session is None or session.peer != src or session.phase != "probe":
            return []
        reply = ProbeReply(msg.level, msg.differing, {i: dict(pairs) for i, pairs in msg.leaves})
        try:
            probe = session.diff.receive(reply)
        except ValueError as exc:
            return self._end_session(now, session, f"bad reply from {src}: {exc}")
        if probe is not None:
            return [Send(src, RepairProbe(session.id, session.keyspace, probe))]
        result = session.diff.result()
        session.keys = result.keys
        if not session.keys:
            return self._end_session(now, session)
        session.equal = False
        session.phase = "fetch"
        return [Send(src, RepairFetch(session.id, session.keyspace, session.keys))]

    def _on_fetch_reply(self, now: float, src: str, msg: RepairFetchReply) -> list[Effect]:
        session = self.repairs.get(msg.session)
        if session is None or session.peer != src or session.phase != "fetch":
            return []
        ks = session.keyspace
        pushes: list[tuple[str, Record]] = []
        for key, theirs in msg.records:
            mine = self.store.get(ks.name, key)
            merged = merge_records(ks.policy, mine, theirs)
            if merged is None or (mine is None and self._already_reaped(ks.name, key, merged)):
                continue
            if merged != mine:
                self.store.put(ks.name, key, merged)
            if merged != theirs:
                pushes.append((key, merged))
        self.metrics.keys_repaired += len(session.keys)
        if not pushes:
            return self._end_session(now, session)
        session.phase = "push"
        return [Send(src, RepairPush(session.id, ks, tuple(pushes)), durable=True)]

    def _on_repair_done(self, now: float, src: str, msg: RepairDone) -> list[Effect]:
        session = self.repairs.get(msg.session)
        if session is None or session.peer != src or session.phase != "push":
            return []
        return self._end_session(now, session)

    def _end_session(self, now: float, session: RepairSession, error: str = "") -> list[Effect]:
        self.repairs.pop(session.id, None)
        key: RangeKey = (session.keyspace.name, session.lo, session.hi)
        out: list[Effect] = []
        if not error:
            self.last_repair[key] = now
            self._reap(now, session)
        batch = self.repair_batches.get(session.batch)
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
        raise NotImplementedError  # the node answers the client (replica.py)

    def expire_repairs(self, now: float) -> list[Effect]:
        out: list[Effect] = []
        for session in [s for s in self.repairs.values() if s.deadline <= now]:
            out.extend(self._end_session(now, session, f"no answer from {session.peer} in time"))
        return out

    def background_repair(self, now: float) -> list[Effect]:
        """Every repair interval, compare the next (range, peer) in turn."""
        if self.config.repair_interval <= 0 or now < self._next_repair:
            return []
        self._next_repair = now + self.config.repair_interval
        if any(s.batch == 0 for s in self.repairs.values()):
            return []
        if not self._repair_queue:
            self._repair_queue = [
                (ks, lo, hi, peer) for ks, lo, hi, peers in self.replicated_ranges() for peer in peers
            ]
            self._repair_queue.reverse()
        while self._repair_queue:
            ks, lo, hi, peer = self._repair_queue.pop()
            if self.liveness.is_up(peer, now):
                return self.start_repair(now, ks, lo, hi, peer)
        return []

    # --- responder ---------------------------------------------------------------------------

    def _on_probe(self, src: str, msg: RepairProbe) -> list[Effect]:
        self._learn(msg.keyspace)
        probe = msg.probe
        tree, _ = self.build_tree(msg.keyspace.name, probe.lo, probe.hi, probe.depth)
        try:
            reply = tree.answer(probe)
        except ValueError:
            return []
        leaves = tuple((i, tuple(sorted(entries.items()))) for i, entries in sorted(reply.leaves.items()))
        return [Send(src, RepairProbeReply(msg.session, reply.level, reply.differing, leaves))]

    def _on_fetch(self, src: str, msg: RepairFetch) -> list[Effect]:
        records = tuple((key, self.store.get(msg.keyspace.name, key)) for key in msg.keys)
        return [Send(src, RepairFetchReply(msg.session, records))]

    def _on_push(self, src: str, msg: RepairPush) -> list[Effect]:
        self._learn(msg.keyspace)
        for key, record in msg.records:
            mine = self.store.get(msg.keyspace.name, key)
            if mine is None and self._already_reaped(msg.keyspace.name, key, record):
                continue  # we reaped this tombstone already: do not let repair bring it back
            merged = merge_records(msg.keyspace.policy, mine, record)
            if merged is not None:
                self.store.put(msg.keyspace.name, key, merged)
        return [Send(src, RepairDone(msg.session), durable=True)]

    # --- tombstone reaping -------------------------------------------------------------------

    def _reap(self, now: float, session: RepairSession) -> None:
        """Note that the peer holds our tombstones; remove those every other replica holds."""
        ks = session.keyspace
        others = [p for p in self.ring.preference_list(session.hi, ks.n) if p != self.id]
        for key, held in session.tombstones.items():
            record = self.store.get(ks.name, key)
            if record is None or digest(record) != held:
                self.confirmed.pop((ks.name, key), None)  # changed since: start over
                continue
            seen, peers = self.confirmed.get((ks.name, key), (held, set()))
            if seen != held:
                peers = set()
            peers.add(session.peer)
            self.confirmed[(ks.name, key)] = (held, peers)
            assert isinstance(record, Versioned)
            written = max(s.ts for s in record.siblings)
            if now - written > self.config.tombstone_grace and all(p in peers for p in others):
                self.store.remove(ks.name, key)
                del self.confirmed[(ks.name, key)]
                self.reaped[(ks.name, key)] = written
                self.metrics.tombstones_reaped += 1

    def _already_reaped(self, keyspace: str, key: str, record: Record) -> bool:
        """Is `record` a tombstone no newer than one this node reaped? (Replicas reap one by one;
        without this, the last to reap would push its copy back to those that already had.)"""
        when = self.reaped.get((keyspace, key))
        return when is not None and _is_tombstone(record) and max(s.ts for s in record.siblings) <= when

    def repair_ages(self, now: float) -> dict[str, float | None]:
        """Seconds since each replicated range was last repaired (None: never)."""
        ages: dict[str, float | None] = {}
        for ks, lo, hi, _ in self.replicated_ranges():
            last = self.last_repair.get((ks.name, lo, hi))
            ages[f"{ks.name}:({lo},{hi}]"] = None if last is None else round(now - last, 3)
        return ages


def _is_tombstone(record: Record) -> bool:
    return (
        isinstance(record, Versioned)
        and bool(record.siblings)
        and all(s.value is None for s in record.siblings)
    )
