"""Ownership handoff: records this node holds for keys it no longer replicates go to their replicas.

After the ring moves, a node may hold records of keys it is no replica of: a write it took as a
replica before it heard of a join, or one a coordinator that had not heard of it yet sent it
later, a stream or repair from a node with an older view. Anti-entropy compares only the replicas
of a range, and reads go only to them, so such a record is lost to every read although it is
stored, and it may be the only copy of an acknowledged write (a coordinator that had not heard of
a join: `bhandar chaos --seed 918996 --ops 8000 --faults all`). As Riak's ownership handoff does,
the node walks its store after every change of the ring, and every `WALK_EVERY` seconds for what
stale views sent it since, and sends each such record to every replica of its key (those of the
future ring too, while a range moves), each acknowledgement remembered with the record's digest so
that only what changed goes again. A walk reads only the arcs the node replicates in neither ring,
from the hash index (core/repair/hash_index.py): hashing every key of the store was an idle node's main cost.

Once every replica it was sent to has acknowledged a record, and the ring has stood still here for
the time every node takes to hear of a change (`NodeConfig.detection_bound`), the node drops its
copy. Until then a coordinator that has not heard of the move yet still reads from this node as a
replica, and an answer "absent" from it would be a stale read where R + W > N (`bhandar chaos
--seed 226736680 --ops 2000`: a node dropped a key it had handed to a node that had just joined,
and a read at ONE met it). Then it drops the copy, as Riak does: kept, the copy only ages, and once
the replicas have deleted the key and reaped the tombstone (core/repair/reaping.py asks only the
replicas) it would bring the deleted value back, sent again after a restart or served again when
the range moves back to this node. Its dots are never minted again without the record (the dot
lease, dot_lease.py, never issues a counter twice). A counter is kept, as its actor must never
forget its own entry (core/model/crdt.py), and a counter cannot be deleted; the digest of what its
replicas acknowledged goes to the store's metadata so that it is not sent again after a restart.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field

from bhandar_cli.core.membership import Ring
from bhandar_cli.core.model import KeyspaceDef, NodeConfig, Versioned, digest
from bhandar_cli.core.protocol import Effect, PendingOwnership, ReplicaAck, ReplicaWrite, Send
from bhandar_cli.core.repair import HashIndex
from bhandar_cli.core.roles.role_context import RoleContext

Arc = tuple[int, int, tuple[str, ...], tuple[str, ...]]  # (lo, hi, replicas now, replicas to be)
WALK_EVERY = 10.0  # seconds between two walks of the store while the ring stands still
IN_FLIGHT = 256  # handoffs awaiting acknowledgement, at most; the rest go at the next walk


@dataclass
class Handed:
    """What the replicas of one foreign key acknowledged: the digest of the record they took."""

    digest: bytes
    acked: set[str] = field(default_factory=set)
    targets: set[str] = field(default_factory=set)  # the replicas it goes to, as of the last walk


class OwnershipHandoff:
    """Walks the store for keys this node no longer replicates and hands them to their replicas."""

    def __init__(self, context: RoleContext, config: NodeConfig, hash_index: HashIndex, now: float) -> None:
        self.node_id = context.node_id
        self.config = config
        self.store = context.store
        self.hash_index = hash_index
        self.keyspaces = context.keyspaces
        self.ring_view = context.ring_view
        self.pending = context.pending
        self._handed: dict[tuple[str, str], Handed] = {}
        self._rings: tuple[Ring, Ring] | None = None  # the rings of the last walk
        self._moved_at = now  # when they last changed
        self._runs: dict[tuple[Ring, Ring, int], list[list[Arc]]] = {}  # foreign arcs of those rings
        self._next_walk = now
        self._in_flight = 0

    def tick(self, now: float) -> list[Effect]:
        view = self.ring_view
        if not view.gossiping or view.status != "normal":
            return []
        rings = (view.ring, view.future_ring())
        moved = self._rings is None or rings[0] is not self._rings[0] or rings[1] is not self._rings[1]
        if not moved and now < self._next_walk:
            return []
        if moved:
            self._moved_at = now
        self._rings = rings
        self._next_walk = now + WALK_EVERY
        return self._walk(now, *rings)

    def _walk(self, now: float, current: Ring, future: Ring) -> list[Effect]:
        out: list[Effect] = []
        foreign: set[tuple[str, str]] = set()
        for ks in self.keyspaces.all():
            for run in self._foreign_runs(current, future, ks.n):
                his = [arc[1] for arc in run]
                for token, key, d in sorted(self.hash_index.space(ks.name).entries(run[0][0], run[-1][1])):
                    _, _, owners, pending = run[0] if len(run) == 1 else run[bisect_left(his, token)]
                    out.extend(self._hand_over(now, ks, key, d, owners, pending, foreign))
        # Keys this node replicates again, holds no more, or has handed over need no memory.
        for gone in [k for k in self._handed if k not in foreign]:
            del self._handed[gone]
        return out

    def _foreign_runs(self, current: Ring, future: Ring, n: int) -> list[list[Arc]]:
        """The foreign arcs, adjacent ones grouped into runs (the first arc, which wraps, alone), so
        a walk reads the index once per run rather than once per token of a 240-node ring; kept
        while the rings stand (the walk every WALK_EVERY seconds reuses them). In ring order, each
        run's keys sorted by token: the order of a walk arc by arc."""
        key = (current, future, n)
        runs = self._runs.get(key)
        if runs is None:
            runs = []
            for arc in self._foreign_arcs(current, future, n):
                if runs and runs[-1][-1][1] == arc[0] and runs[-1][0][0] < runs[-1][0][1]:
                    runs[-1].append(arc)
                else:
                    runs.append([arc])
            self._runs = {k: v for k, v in self._runs.items() if k[0] is current and k[1] is future}
            self._runs[key] = runs
        return runs

    def _foreign_arcs(
        self, current: Ring, future: Ring, n: int
    ) -> Iterator[tuple[int, int, tuple[str, ...], tuple[str, ...]]]:
        """The arcs (lo, hi] this node replicates in neither ring, with their replicas in both.
        Between two consecutive tokens of either ring both preference lists stay the same."""
        bounds = sorted(set(current.positions) | set(future.positions))
        if not current.positions or not future.positions:
            return
        for i, hi in enumerate(bounds):
            owners, pending = current.preference_list(hi, n), future.preference_list(hi, n)
            if self.node_id not in owners and self.node_id not in pending:
                yield bounds[i - 1], hi, owners, pending

    def _hand_over(
        self,
        now: float,
        ks: KeyspaceDef,
        key: str,
        d: bytes,
        owners: tuple[str, ...],
        pending: tuple[str, ...],
        foreign: set[tuple[str, str]],
    ) -> list[Effect]:
        """Send a record this node does not replicate to the replicas that have not acknowledged it."""
        record = self.store.get(ks.name, key)
        if record is None or self.store.get_meta(_handed_name(ks.name, key)) == d:
            return []  # (a counter its replicas have: see the module docstring)
        foreign.add((ks.name, key))
        handed = self._handed.get((ks.name, key))
        if handed is None or handed.digest != d:
            handed = self._handed[(ks.name, key)] = Handed(d)
        view = self.ring_view
        handed.targets = {t for t in owners + pending if view.status_of(t) not in ("leaving", "left")}
        if handed.targets and handed.targets <= handed.acked:
            if self._settled(now):  # acknowledged while the ring was still moving: drop it now
                self._handed_over(ks.name, key, d)
            return []
        out: list[Effect] = []
        for target in sorted(handed.targets - handed.acked):
            if not view.is_up(target, now):
                continue
            if self._in_flight >= IN_FLIGHT:
                self._next_walk = now  # more to hand over: walk again at the next tick
                break
            op_id = self.pending.add(
                PendingOwnership(now + self.config.request_timeout, target, ks.name, key, d)
            )
            self._in_flight += 1
            out.append(Send(target, ReplicaWrite(op_id, ks, key, record, None, "handoff")))
        return out

    def on_ack(self, now: float, op_id: int, src: str, msg: ReplicaAck, op: PendingOwnership) -> list[Effect]:
        self.pending.discard(op_id)
        self._in_flight = max(0, self._in_flight - 1)
        handed = self._handed.get((op.keyspace, op.key))
        if msg.ok and handed is not None and handed.digest == op.digest:
            handed.acked.add(src)
            if handed.targets <= handed.acked and self._settled(now):
                self._handed_over(op.keyspace, op.key, handed.digest)
        return []

    def _settled(self, now: float) -> bool:
        """Whether every node has heard of the ring as this node sees it (see the docstring)."""
        return not self.ring_view.moving() and now - self._moved_at >= self.config.detection_bound()

    def _handed_over(self, keyspace: str, key: str, handed: bytes) -> None:
        """Every replica holds the record: drop it (a counter: note it), unless it changed since."""
        del self._handed[(keyspace, key)]
        record = self.store.get(keyspace, key)
        if record is None or digest(record) != handed:
            return  # a late write merged into it since: the next walk hands the new record over
        if isinstance(record, Versioned):
            self.store.remove(keyspace, key)
        else:
            self.store.put_meta(_handed_name(keyspace, key), handed)

    def expire(self, op: PendingOwnership) -> list[Effect]:
        """No acknowledgement in time: the next walk sends it again."""
        self._in_flight = max(0, self._in_flight - 1)
        return []


def _handed_name(keyspace: str, key: str) -> str:
    """The metadata entry holding the digest of the counter of `key` its replicas acknowledged."""
    return f"handed:{keyspace}/{key}"
