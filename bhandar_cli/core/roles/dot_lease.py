"""The dot counter lease: one node-wide sequence of counters for the node's home actor.

The actor must never mint a dot it minted before. A key's record alone cannot promise that: once a
sibling is superseded only contexts remember its dot, and contexts were then pruned past 10
entries (smallest counters first), so a counter taken from the record could come round again, and
any context that saw the old dot would cover the new write (found by `bhandar chaos --seed 350
--ops 3000 --faults all --storage lsm`; contexts are no longer pruned, and a record can still lose
a sibling to a restore). So every counter of the home actor, for every key, comes from one
sequence, above everything issued before.

The sequence is persisted as a lease (as Riak's vnode counter lease): a high-water mark `mark`
(meta `dot_lease` = [actor, mark]) written once every `LEASE` dots rather than a record per put. A
restarted node starts above the persisted mark, so it skips at most `LEASE` counters and never
repeats one. A counter may leave the node (be sent or acknowledged) only once a mark at or above it
is durable: `saved` is the highest counter known safe (durable, or read from the store at boot,
where everything at or below it was issued in an earlier life). The lease asks for its new mark
ahead of need, half a lease early, and learns it is durable from a `DotLeaseSaved` effect the
driver hands back after the sync that covers it; until then a write with a counter above `saved`
must wait for the sync before it is sent.

Before the lease each put wrote a meta record `dot:{actor}:{keyspace}/{key}`; `load` migrates a
store that has them: the lease starts above every counter they held, then they are deleted.
"""

from __future__ import annotations

from bhandar_cli.core.model import MAX_INTEGER, Store
from bhandar_cli.core.protocol import DotLeaseSaved

LEASE = 1000  # counters per persisted mark: what a restart may skip
META = "dot_lease"
OLD_RECORDS = "dot:"  # the per-key records the lease replaced


class DotLease:
    """The home actor's counter sequence and the durable high-water mark that bounds it."""

    def __init__(self, store: Store, actor: str, issued: int) -> None:
        self._store = store
        self.actor = actor
        self.issued = issued  # the highest counter handed out, in this life or an earlier one
        self.mark = issued  # the highest mark written
        self.saved = issued  # every counter up to here may leave the node without a sync

    @classmethod
    def load(cls, store: Store, actor: str) -> DotLease:
        """The lease of `actor` as the store holds it, after migrating the old per-key records."""
        persisted = store.get_meta(META)
        issued = int(persisted[1]) if persisted and persisted[0] == actor else 0
        prefix = f"{OLD_RECORDS}{actor}:"
        old = list(store.meta_names(OLD_RECORDS))
        for name in old:
            if name.startswith(prefix):
                issued = max(issued, int(store.get_meta(name) or 0))
        if old:
            # The mark goes into the store before the deletes: a crash keeps a prefix of the
            # writes, so the records are never gone while the mark above them is missing.
            store.put_meta(META, [actor, issued])
            for name in old:
                store.remove_meta(name)
        return cls(store, actor, issued)

    def adopt(self, actor: str) -> None:
        """The node writes as a new actor from now on: its sequence starts afresh (no record holds
        a dot of a new actor). The first counter persists the new actor's mark."""
        self.actor = actor
        self.issued = self.mark = self.saved = 0

    def next_counter(self, floor: int) -> int:
        """The counter the next dot would take: above every counter issued, and at least `floor`
        (one above what the key's record and context claim for the actor). May exceed
        MAX_INTEGER: the caller then takes a new actor instead of calling `take`."""
        return max(floor, self.issued + 1)

    def take(self, counter: int) -> DotLeaseSaved | None:
        """Issue `counter` (from `next_counter`). When it needs a new mark, the mark is written
        and the effect returned must go out durable, to tell the lease once it is saved."""
        self.issued = counter
        pending = self.mark > self.saved
        if counter <= self.mark and (pending or self.mark - counter >= LEASE // 2):
            return None
        self.mark = min(counter + LEASE, MAX_INTEGER)
        self._store.put_meta(META, [self.actor, self.mark])
        return DotLeaseSaved(self.actor, self.mark)

    def may_send(self, counter: int) -> bool:
        """Whether a dot with `counter` may leave the node before the store's next sync."""
        return counter <= self.saved

    def on_saved(self, effect: DotLeaseSaved) -> None:
        """The sync covering `effect`'s mark finished."""
        if effect.actor == self.actor and effect.mark > self.saved:
            self.saved = effect.mark
