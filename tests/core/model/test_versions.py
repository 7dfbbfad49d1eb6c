"""Dotted version vectors: merge laws, no silent loss, siblings for concurrent writes, LWW.

Histories are generated the way the store produces them: coordinators give out dots with
`next_dot` over their own copy, clients write with the context of a read of some replica's copy,
and replicas exchange whole records; nodes that hold no copy forward puts under exact dots, which
coordinators take in any order, maybe twice. The merge laws are checked on every record such a
history produces (associativity needs such records: with arbitrary contexts, as the pruning the
store once did could produce, it fails).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from bhandar_cli.core.model.context import decode_context, encode_context
from bhandar_cli.core.model.records import Versioned, from_plain, merge_records, to_plain
from bhandar_cli.core.model.versions import (
    JSON,
    VOID,
    Dot,
    Sibling,
    add_dot,
    context_of,
    covers,
    descends,
    exact_actor,
    is_exact,
    join,
    lww_merge,
    merge_siblings,
    next_dot,
    show_clock,
)

ACTORS = ("A", "B", "C")
FORWARDERS = ("D", "E")  # nodes that hold no copy: they mint exact dots for the puts they forward


@dataclass
class World:
    """Three replicas, each also a coordinator; two forwarders; every write ever made."""

    state: dict[str, tuple[Sibling, ...]] = field(default_factory=lambda: {a: () for a in ACTORS})
    writes: list[Sibling] = field(default_factory=list)
    seen: list[tuple[Sibling, ...]] = field(default_factory=list)
    # Every dot each replica ever merged, and what the replica a write's context came from had
    # seen when it was read (a context may cover nothing else).
    dots_seen: dict[str, set[Dot]] = field(default_factory=lambda: {a: set() for a in ACTORS})
    read_had_seen: dict[Dot, frozenset[Dot]] = field(default_factory=dict)
    exact_counters: dict[str, int] = field(default_factory=dict)
    in_flight: list[Sibling] = field(default_factory=list)  # forwarded puts, delivered in any order

    def _store(self, replica: str, siblings: tuple[Sibling, ...]) -> None:
        self.state[replica] = merge_siblings(self.state[replica], siblings)
        for s in siblings:  # a write brings its dot, and what its writer had seen
            self.dots_seen[replica].add(s.dot)
            self.dots_seen[replica] |= self.read_had_seen.get(s.dot, frozenset())
        self.seen.append(self.state[replica])

    def _context(self, read_from: str | None) -> dict[str, int]:
        return {} if read_from is None else context_of(self.state[read_from])

    def put(self, coordinator: str, read_from: str | None, value: bytes | None) -> Sibling:
        context = self._context(read_from)
        local = self.state[coordinator]
        sibling = Sibling(next_dot(local, coordinator, context), context, value, ts=float(len(self.writes)))
        self._record(sibling, read_from)
        self._store(coordinator, (sibling,))
        return sibling

    def forward(self, forwarder: str, read_from: str | None, value: bytes | None) -> Sibling:
        """A put forwarded under an exact dot (dense per key): its coordinators take it later."""
        actor = exact_actor(forwarder)
        self.exact_counters[actor] = self.exact_counters.get(actor, 0) + 1
        context = self._context(read_from)
        sibling = Sibling((actor, self.exact_counters[actor]), context, value, ts=float(len(self.writes)))
        self._record(sibling, read_from)
        self.in_flight.append(sibling)
        return sibling

    def deliver(self, coordinator: str, which: int) -> None:
        """A coordinator takes a forwarded put (again, perhaps: a fallback after a slow first)."""
        if self.in_flight:
            self._store(coordinator, (self.in_flight[which % len(self.in_flight)],))

    def _record(self, sibling: Sibling, read_from: str | None) -> None:
        self.writes.append(sibling)
        had = self.dots_seen[read_from] if read_from is not None else set()
        self.read_had_seen[sibling.dot] = frozenset(had)

    def sync(self, src: str, dst: str) -> None:
        self._store(dst, self.state[src])
        self.dots_seen[dst] |= self.dots_seen[src]


step = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(ACTORS),
        st.one_of(st.none(), st.sampled_from(ACTORS)),
        st.booleans(),  # a delete (tombstone) instead of a value
        st.just(0),
    ),
    st.tuples(
        st.just("forward"),
        st.sampled_from(FORWARDERS),
        st.one_of(st.none(), st.sampled_from(ACTORS)),
        st.booleans(),
        st.just(0),
    ),
    st.tuples(st.just("deliver"), st.sampled_from(ACTORS), st.just(None), st.just(False), st.integers(0, 7)),
    st.tuples(st.just("sync"), st.sampled_from(ACTORS), st.sampled_from(ACTORS), st.just(False), st.just(0)),
)


def run(steps: list[tuple[str, str, str | None, bool, int]]) -> World:
    world = World()
    for i, (kind, a, b, tombstone, which) in enumerate(steps):
        value = None if tombstone else f"v{i}".encode()
        if kind == "put":
            world.put(a, b, value)
        elif kind == "forward":
            world.forward(a, b, value)
        elif kind == "deliver":
            world.deliver(a, which)
        else:
            assert b is not None
            world.sync(a, b)
    for pending in world.in_flight:  # every forwarded put reaches a coordinator in the end
        world._store(ACTORS[0], (pending,))
    return world


histories = st.lists(step, min_size=1, max_size=40).map(run)


def records(world: World) -> st.SearchStrategy[tuple[Sibling, ...]]:
    return st.sampled_from([*world.seen, ()])


@settings(max_examples=200)
@given(data=st.data(), world=histories)
def test_merge_is_commutative_associative_idempotent(data: st.DataObject, world: World) -> None:
    a, b, c = (data.draw(records(world)) for _ in range(3))
    assert merge_siblings(a, b) == merge_siblings(b, a)
    assert merge_siblings(merge_siblings(a, b), c) == merge_siblings(a, merge_siblings(b, c))
    assert merge_siblings(a, a) == merge_siblings(a, ())
    ab = merge_siblings(a, b)
    assert merge_siblings(ab, b) == ab


@settings(max_examples=200)
@given(data=st.data(), world=histories)
def test_record_fast_paths_agree_with_the_full_merge(data: st.DataObject, world: World) -> None:
    a, b = data.draw(records(world)), data.draw(records(world))
    merged = merge_records("siblings", Versioned(a), Versioned(b))
    assert merged == Versioned(merge_siblings(a, b))


@settings(max_examples=300)
@given(world=histories)
def test_no_write_is_dropped_unless_a_later_write_covered_it(world: World) -> None:
    final: tuple[Sibling, ...] = ()
    for replica in world.state.values():
        final = merge_siblings(final, replica)
    present = {s.dot for s in final}
    for w in world.writes:
        if w.dot in present:
            continue
        assert any(covers(other.context, w.dot) for other in world.writes if other is not w), w


@settings(max_examples=300)
@given(world=histories)
def test_a_context_never_claims_a_dot_its_read_had_not_seen(world: World) -> None:
    """The lost write a forwarder's dots made when contexts summed them up as a counter (chaos
    seed 3): exact dots arrive in any order, and a read that met E~x:2 before E~x:1 must not
    cover E~x:1. Home replicas' dots may be claimed by counter: their records travel whole."""
    for w in world.writes:
        had = world.read_had_seen[w.dot]
        for other in world.writes:
            if other is not w and covers(w.context, other.dot):
                assert other.dot in had, (w, other)


@settings(max_examples=300)
@given(world=histories)
def test_contexts_hold_one_entry_per_actor_once_every_dot_is_seen(world: World) -> None:
    for name in ACTORS:
        world.sync(name, ACTORS[0])
    context = context_of(world.state[ACTORS[0]])
    assert all(":" not in entry for entry in context), context  # no cloud left once nothing is missing


@settings(max_examples=300)
@given(world=histories)
def test_dots_are_never_reused(world: World) -> None:
    dots = [w.dot for w in world.writes]
    assert len(dots) == len(set(dots))


@settings(max_examples=200)
@given(world=histories, coordinator=st.sampled_from(ACTORS), read_from=st.sampled_from(ACTORS))
def test_two_puts_with_the_same_context_through_one_coordinator_both_survive(
    world: World, coordinator: str, read_from: str
) -> None:
    context = context_of(world.state[read_from])  # two clients read the same copy
    local = world.state[coordinator]
    first = Sibling(next_dot(local, coordinator, context), context, b"first")
    local = merge_siblings(local, (first,))
    second = Sibling(next_dot(local, coordinator, context), context, b"second")
    local = merge_siblings(local, (second,))
    assert first.dot != second.dot
    assert {b"first", b"second"} <= {s.value for s in local}


def test_two_puts_same_context_same_coordinator_example() -> None:
    base = (Sibling(("A", 1), {}, b"rice"),)
    ctx = context_of(base)
    oil = Sibling(next_dot(base, "A", ctx), ctx, b"rice,oil")
    after_oil = merge_siblings(base, (oil,))
    salt = Sibling(next_dot(after_oil, "A", ctx), ctx, b"rice,salt")
    after_salt = merge_siblings(after_oil, (salt,))
    assert [s.value for s in after_salt] == [b"rice,oil", b"rice,salt"]
    resolved = Sibling(next_dot(after_salt, "B", context_of(after_salt)), context_of(after_salt), b"all")
    assert [s.value for s in merge_siblings(after_salt, (resolved,))] == [b"all"]


sibling_lists = st.lists(
    st.builds(
        Sibling,
        dot=st.tuples(st.sampled_from(ACTORS), st.integers(1, 5)),
        context=st.just({}),
        value=st.binary(max_size=3),
        ts=st.floats(0, 10, allow_nan=False),
    ),
    max_size=6,
)


@given(a=sibling_lists, b=sibling_lists)
def test_lww_keeps_the_greatest_timestamp_then_dot(a: list[Sibling], b: list[Sibling]) -> None:
    merged = lww_merge(a, b)
    everything = [*a, *b]
    if not everything:
        assert merged == ()
        return
    best = max(everything, key=lambda s: (s.ts, s.dot))
    assert len(merged) == 1
    assert (merged[0].ts, merged[0].dot) == (best.ts, best.dot)
    assert (lww_merge(b, a)[0].ts, lww_merge(b, a)[0].dot) == (best.ts, best.dot)


def test_exact_dots_fold_into_a_prefix_once_the_gap_is_seen() -> None:
    seen: dict[str, int] = {}
    add_dot(seen, ("E~x", 2))
    assert seen == {"E~x:2": 2} and not covers(seen, ("E~x", 1)) and covers(seen, ("E~x", 2))
    add_dot(seen, ("E~x", 1))
    assert seen == {"E~x": 2}
    add_dot(seen, ("E~x", 4))
    assert seen == {"E~x": 2, "E~x:4": 4} and show_clock(seen) == "{E~x:2+4}"
    assert join([{"E~x": 2, "E~x:4": 4}, {"E~x:3": 3}]) == {"E~x": 4}
    assert descends({"E~x": 4}, {"E~x": 2, "E~x:4": 4}) and not descends({"E~x": 3}, {"E~x:4": 4})
    # A home actor's dot is claimed by counter, as before.
    home: dict[str, int] = {}
    add_dot(home, ("A", 5))
    assert home == {"A": 5} and covers(home, ("A", 3))
    assert [is_exact(a) for a in ("E~x", "E~x7", "A", "A~3", "A~r1", "A~g2", "A~xy")] == [
        True,
        True,
        False,
        False,
        False,
        False,
        False,
    ]


def test_a_void_wins_over_a_copy_of_its_dot_in_either_order() -> None:
    put = Sibling(("E~x", 1), {}, b"refused", JSON, 1.0)
    void = Sibling(("E~x", 1), {}, None, VOID, 1.0)
    other = Sibling(("A", 1), {}, b"a")
    left = merge_siblings((put, other), (void,))
    right = merge_siblings((void,), (put, other))
    assert left == right and [s.void for s in left if s.dot == ("E~x", 1)] == [True]
    assert merge_records("siblings", Versioned((put,)), Versioned((void,))) == Versioned((void,))
    assert merge_records("siblings", Versioned((void,)), Versioned((put,))) == Versioned((void,))


def test_a_previous_release_context_and_record_read_as_they_did() -> None:
    """Tokens and records written before exact dots: a map of actor counters, fallback writes
    under a fresh actor each (`B~3`). They decode, cover what they covered, and merge with
    siblings under exact dots."""
    old_token = encode_context({"A": 4, "B~3": 1, "C": 2})  # as the previous release encoded it
    context = decode_context(old_token)
    assert context == {"A": 4, "B~3": 1, "C": 2}
    assert covers(context, ("A", 3)) and covers(context, ("B~3", 1)) and not covers(context, ("B~4", 1))
    old = Versioned(
        (
            Sibling(("A", 4), {"C": 2}, b"a"),
            Sibling(("B~3", 1), {"C": 2}, b"b"),
        )
    )
    assert from_plain(to_plain(old)) == old
    new = Sibling(("E~x", 1), context, b"e")  # written with the old token, forwarded by E
    merged = merge_records("siblings", old, Versioned((new,)))
    assert merged == Versioned((new,))
