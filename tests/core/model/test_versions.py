"""Dotted version vectors: merge laws, no silent loss, siblings for concurrent writes, LWW.

Histories are generated the way the store produces them: coordinators give out dots with
`next_dot` over their own copy, clients write with the context of a read of some replica's copy,
and replicas exchange whole records. The merge laws are checked on every record such a history
produces; associativity needs such records (with arbitrary contexts, as pruning can produce, it
fails; see the last test).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from bhandar_cli.core.model.records import Versioned, merge_records
from bhandar_cli.core.model.versions import Sibling, context_of, covers, lww_merge, merge_siblings, next_dot

ACTORS = ("A", "B", "C")


@dataclass
class World:
    """Three replicas, each also a coordinator, and every write ever made."""

    state: dict[str, tuple[Sibling, ...]] = field(default_factory=lambda: {a: () for a in ACTORS})
    writes: list[Sibling] = field(default_factory=list)
    seen: list[tuple[Sibling, ...]] = field(default_factory=list)

    def put(self, coordinator: str, read_from: str | None, value: bytes | None) -> Sibling:
        context = {} if read_from is None else context_of(self.state[read_from])
        local = self.state[coordinator]
        sibling = Sibling(next_dot(local, coordinator, context), context, value, ts=float(len(self.writes)))
        self.state[coordinator] = merge_siblings(local, (sibling,))
        self.writes.append(sibling)
        self.seen.append(self.state[coordinator])
        return sibling

    def sync(self, src: str, dst: str) -> None:
        self.state[dst] = merge_siblings(self.state[dst], self.state[src])
        self.seen.append(self.state[dst])


step = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(ACTORS),
        st.one_of(st.none(), st.sampled_from(ACTORS)),
        st.booleans(),  # a delete (tombstone) instead of a value
    ),
    st.tuples(st.just("sync"), st.sampled_from(ACTORS), st.sampled_from(ACTORS), st.just(False)),
)


def run(steps: list[tuple[str, str, str | None, bool]]) -> World:
    world = World()
    for i, (kind, a, b, tombstone) in enumerate(steps):
        if kind == "put":
            world.put(a, b, None if tombstone else f"v{i}".encode())
        else:
            assert b is not None
            world.sync(a, b)
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


def test_pruned_contexts_make_merge_order_matter() -> None:
    """Why chaos runs repair in rounds: a pruned context may drop the only link that covered a
    sibling, and then merging in another order keeps it (merge is not associative there)."""
    old = Sibling(("D~8", 1), {}, b"old")
    covering = Sibling(("B", 45), {"D~8": 1}, b"b45")
    newest = Sibling(("A", 59), {"B": 45}, b"a59")  # its context lost D~8 to pruning
    left = merge_siblings(merge_siblings((old,), (covering,)), (newest,))
    right = merge_siblings((old,), merge_siblings((covering,), (newest,)))
    assert [s.value for s in left] == [b"a59"]
    assert sorted(s.value or b"" for s in right) == [b"a59", b"old"]
