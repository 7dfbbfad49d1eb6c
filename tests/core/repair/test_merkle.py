"""Merkle trees: diff finds exactly the differing keys, exchanging only differing leaves."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bhandar_cli.core.repair.merkle import (
    EMPTY_HASH,
    RING_SIZE,
    HashProbe,
    MerkleTree,
    ProbeReply,
    range_size,
)
from bhandar_cli.core.repair.merkle_diff import DiffSession, diff, render_lines

tokens = st.integers(0, RING_SIZE - 1)
depths = st.integers(0, 8)
digests = st.binary(min_size=1, max_size=4)
keys = st.text(alphabet="abcdefgh", min_size=1, max_size=4)


@st.composite
def ranges(draw: st.DrawFn) -> tuple[int, int]:
    """Arcs (lo, hi]: ordinary, wrapping, whole-ring and tiny ones (fewer tokens than leaves)."""
    lo = draw(tokens)
    kind = draw(st.sampled_from(["any", "whole", "tiny", "wrap"]))
    if kind == "whole":
        return lo, lo
    if kind == "tiny":
        return lo, (lo + draw(st.integers(1, 5))) % RING_SIZE
    if kind == "wrap":
        lo = draw(st.integers(RING_SIZE - 1000, RING_SIZE - 1))
        return lo, draw(st.integers(0, 1000))
    return lo, draw(tokens)


def token_in(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(1, range_size(lo, hi)).map(lambda off: (lo + off) % RING_SIZE)


Replica = dict[str, tuple[int, bytes]]  # key -> (token, digest)
Pair = tuple[int, int, int, Replica, Replica]  # lo, hi, depth, replica a, replica b


@st.composite
def replica_pair(draw: st.DrawFn) -> Pair:
    """Two replicas of one range: a shared key → token map, each holding a subset with digests
    that sometimes differ."""
    lo, hi = draw(ranges())
    depth = draw(depths)
    universe = draw(st.dictionaries(keys, token_in(lo, hi), max_size=40))
    a: Replica = {}
    b: Replica = {}
    for key, token in universe.items():
        where = draw(st.sampled_from(["both", "both", "both", "a", "b", "changed"]))
        digest = draw(digests)
        if where in ("both", "a", "changed"):
            a[key] = (token, digest)
        if where in ("both", "b"):
            b[key] = (token, digest)
        if where == "changed":
            b[key] = (token, digest + b"!")
    return lo, hi, depth, a, b


def build(lo: int, hi: int, depth: int, entries: Replica) -> MerkleTree:
    return MerkleTree.build(lo, hi, depth, [(t, k, d) for k, (t, d) in entries.items()])


# ------------------------------------------------------------------------------------------ diff


@given(replica_pair())
def test_diff_finds_exactly_the_naive_difference(pair: Pair) -> None:
    lo, hi, depth, a, b = pair
    ta, tb = build(lo, hi, depth, a), build(lo, hi, depth, b)
    result = diff(ta, tb)

    assert set(result.only_in_a) == a.keys() - b.keys()
    assert set(result.only_in_b) == b.keys() - a.keys()
    assert set(result.changed) == {k for k in a.keys() & b.keys() if a[k][1] != b[k][1]}

    # Leaves exchanged are exactly the buckets whose contents differ, computed without hashes.
    def bucket_contents(entries: Replica) -> dict[int, dict[str, bytes]]:
        out: dict[int, dict[str, bytes]] = {}
        for key, (token, digest) in entries.items():
            out.setdefault(ta.bucket(token), {})[key] = digest
        return out

    ca, cb = bucket_contents(a), bucket_contents(b)
    naive = {i for i in ca.keys() | cb.keys() if ca.get(i, {}) != cb.get(i, {})}
    assert set(result.differing_leaves) == naive
    assert result.leaves_exchanged == len(naive)
    assert result.equal == (not naive) == (ta.root == tb.root)
    assert set(result.leaf_keys) == naive
    assert sorted(k for ks in result.leaf_keys.values() for k in ks) == list(result.keys)


@given(replica_pair())
def test_diff_descends_only_into_differing_subtrees(pair: Pair) -> None:
    lo, hi, depth, a, b = pair
    ta, tb = build(lo, hi, depth, a), build(lo, hi, depth, b)
    result = diff(ta, tb)
    visited = {(r.level, r.index): r.equal for r in result.visited}
    assert result.hashes_compared == len(result.visited) == len(visited)
    for (level, index), equal in visited.items():
        assert equal == (ta.node_hash(level, index) == tb.node_hash(level, index))
        if level > 0:
            # A node is compared only when its parent differed.
            assert visited[(level - 1, index // 2)] is False
    # Every differing node is descended (down to the leaves).
    for (level, index), equal in visited.items():
        if not equal and level < depth:
            assert (level + 1, 2 * index) in visited
            assert (level + 1, 2 * index + 1) in visited
    # Cost bound: at most 2 hashes per differing node below the root, per level.
    assert result.hashes_compared <= 1 + 2 * depth * max(1, len(result.differing_leaves))
    assert result.round_trips == (depth + 1 if not result.equal else 1)


@given(ranges(), depths, st.data())
def test_identical_entry_sets_have_equal_roots_and_no_differences(
    rng: tuple[int, int], depth: int, data: st.DataObject
) -> None:
    lo, hi = rng
    entries = data.draw(st.dictionaries(keys, st.tuples(token_in(lo, hi), digests), max_size=30))
    ta, tb = build(lo, hi, depth, entries), build(lo, hi, depth, dict(reversed(list(entries.items()))))
    assert ta.root == tb.root
    result = diff(ta, tb)
    assert result.keys == ()
    assert result.differing_leaves == ()
    assert (result.hashes_compared, result.leaves_exchanged, result.round_trips) == (1, 0, 1)


def test_one_changed_key_costs_two_hashes_per_level() -> None:
    depth = 10
    entries = [(i * 4_000_000 + 1, f"k{i}", b"v") for i in range(1000)]
    ta = MerkleTree.build(0, 0, depth, entries)
    tb = MerkleTree.build(0, 0, depth, entries)
    tb.update(entries[500][0], "k500", b"w")
    result = diff(ta, tb)
    assert result.changed == ("k500",)
    assert result.hashes_compared == 1 + 2 * depth
    assert result.leaves_exchanged == 1
    assert result.round_trips == depth + 1


def test_step_wise_protocol_between_two_parties() -> None:
    ta = MerkleTree.build(10, 5, 2, [(20, "x", b"1"), (3, "y", b"1")])  # wraps past 2**32-1
    tb = MerkleTree.build(10, 5, 2, [(20, "x", b"2"), (3, "y", b"1")])
    session = DiffSession(ta)
    probe: HashProbe | None = session.start()
    assert probe == HashProbe(10, 5, 2, 0, (0,), (ta.root,))
    seen_levels = []
    while probe is not None:
        seen_levels.append(probe.level)
        reply = tb.answer(probe)  # this is what would travel between the nodes
        if probe.level < 2:
            assert reply.leaves == {}
        probe = session.receive(reply)
    assert seen_levels == [0, 1, 2]
    assert session.result().changed == ("x",)


def test_answer_refuses_a_probe_for_another_tree() -> None:
    ta = MerkleTree(0, 100, 3)
    with pytest.raises(ValueError, match="tree mismatch"):
        MerkleTree(0, 100, 4).answer(DiffSession(ta).start())
    with pytest.raises(ValueError, match="tree mismatch"):
        diff(ta, MerkleTree(0, 101, 3))


def test_session_rejects_replies_that_do_not_match() -> None:
    session = DiffSession(MerkleTree(0, 100, 3))
    with pytest.raises(RuntimeError):
        session.receive(ProbeReply(0, ()))
    session.start()
    with pytest.raises(ValueError, match="does not answer"):
        session.receive(ProbeReply(0, (1,)))
    with pytest.raises(RuntimeError):
        session.result()


def test_render_marks_differing_branches() -> None:
    ta = MerkleTree.build(0, 0, 2, [(1, "a", b"1"), (3 << 30, "b", b"1")])
    tb = MerkleTree.build(0, 0, 2, [(1, "a", b"1"), (3 << 30, "b", b"2")])
    assert render_lines(diff(ta, tb)) == [
        "≠ L0 #0",
        "  = L1 #0",
        "  ≠ L1 #1",
        "    ≠ L2 #2  keys: b",
        "    = L2 #3",
    ]
    assert render_lines(diff(ta, ta)) == ["= L0 #0"]


# ------------------------------------------------------------------------------------------ upkeep


@given(replica_pair(), st.data())
def test_incremental_updates_equal_a_rebuild(pair: Pair, data: st.DataObject) -> None:
    lo, hi, depth, a, b = pair
    tree = build(lo, hi, depth, a)
    current = dict(a)
    # Turn a into b one operation at a time, in a random order, with some no-op churn.
    ops: list[tuple[str, str]] = [("remove", k) for k in a.keys() - b.keys()]
    ops += [("update", k) for k in b]
    ops = data.draw(st.permutations(ops))
    for op, key in ops:
        if op == "remove":
            assert tree.remove(current[key][0], key)
            del current[key]
        else:
            tree.update(b[key][0], key, b[key][1])
            current[key] = b[key]
        rebuilt = build(lo, hi, depth, current)
        assert tree.root == rebuilt.root
    rebuilt = build(lo, hi, depth, b)
    for level in range(depth + 1):
        for index in range(1 << level):
            assert tree.node_hash(level, index) == rebuilt.node_hash(level, index)
    assert sorted(tree.entries()) == sorted(rebuilt.entries())
    assert len(tree) == len(b)


def test_removing_everything_returns_to_the_empty_tree() -> None:
    tree = MerkleTree.build(0, 1000, 4, [(5, "a", b"1"), (900, "b", b"2")])
    empty = MerkleTree(0, 1000, 4)
    assert tree.root != empty.root
    assert tree.remove(5, "a") and tree.remove(900, "b")
    assert not tree.remove(900, "b")
    assert tree.root == empty.root
    assert tree.node_hash(4, 0) == EMPTY_HASH


def test_key_token_mismatch_and_duplicates_are_caller_bugs() -> None:
    tree = MerkleTree.build(0, 1000, 4, [(5, "a", b"1")])
    with pytest.raises(ValueError, match="is at token 5"):
        tree.update(6, "a", b"2")
    with pytest.raises(ValueError, match="is at token 5"):
        tree.remove(6, "a")
    with pytest.raises(ValueError, match="appears twice"):
        MerkleTree.build(0, 1000, 4, [(5, "a", b"1"), (5, "a", b"1")])
    with pytest.raises(ValueError, match="outside the range"):
        tree.update(1001, "b", b"1")


def test_leaf_hash_depends_on_keys_digests_and_their_boundaries() -> None:
    def root(*entries: tuple[str, bytes]) -> bytes:
        return MerkleTree.build(0, 0, 0, [(i + 1, k, d) for i, (k, d) in enumerate(entries)]).root

    assert root(("ab", b"c")) != root(("a", b"bc"))
    assert root(("a", b"1"), ("b", b"2")) != root(("a", b"2"), ("b", b"1"))
    assert root(("a", b"1")) != root()


# ------------------------------------------------------------------------------------------ buckets


@given(ranges(), depths, st.data())
def test_buckets_are_contiguous_arcs_in_token_order(
    rng: tuple[int, int], depth: int, data: st.DataObject
) -> None:
    lo, hi = rng
    tree = MerkleTree(lo, hi, depth)
    token = data.draw(token_in(lo, hi))
    leaf = tree.bucket(token)
    arc = tree.node_range(depth, leaf)
    assert arc is not None
    assert (token - arc[0] - 1) % RING_SIZE < range_size(*arc)
    # Ancestors' arcs contain it too, and the root's arc is the whole range.
    for level in range(depth + 1):
        arc = tree.node_range(level, leaf >> (depth - level))
        assert arc is not None
        assert (token - arc[0] - 1) % RING_SIZE < range_size(*arc)
    assert tree.node_range(0, 0) == (lo, hi)
    # Offsets map monotonically onto buckets.
    other = data.draw(token_in(lo, hi))
    if (token - lo - 1) % RING_SIZE <= (other - lo - 1) % RING_SIZE:
        assert tree.bucket(token) <= tree.bucket(other)


def test_wrapping_range_buckets() -> None:
    lo, hi = RING_SIZE - 4, 4  # tokens 2**32-3 .. 2**32-1, 0 .. 4: eight tokens
    tree = MerkleTree(lo, hi, 3)
    order = [RING_SIZE - 3, RING_SIZE - 2, RING_SIZE - 1, 0, 1, 2, 3, 4]
    assert [tree.bucket(t) for t in order] == list(range(8))
    assert not tree.contains(lo) and not tree.contains(5)
    assert tree.node_range(1, 0) == (RING_SIZE - 4, 0)
    assert tree.node_range(1, 1) == (0, 4)


def test_a_range_smaller_than_the_leaf_count_leaves_empty_buckets() -> None:
    tree = MerkleTree(100, 102, 3)  # two tokens, eight leaves
    assert {tree.bucket(101), tree.bucket(102)} == {0, 4}
    assert [tree.node_range(3, i) is None for i in range(8)].count(False) == 2


def test_whole_ring_and_bounds() -> None:
    tree = MerkleTree(7, 7, 1)
    assert tree.size == RING_SIZE
    assert tree.bucket(8) == 0 and tree.bucket(7) == 1
    with pytest.raises(ValueError):
        MerkleTree(0, RING_SIZE, 1)
    with pytest.raises(ValueError):
        MerkleTree(0, 1, 25)
    with pytest.raises(ValueError, match="no node"):
        tree.node_hash(2, 0)
    with pytest.raises(ValueError, match="a leaf has no children"):
        tree.children(1, 0)
    assert tree.children(0, 0) == ((1, 0), (1, 1))


def test_sparse_trees_are_cheap_to_build_deep() -> None:
    # 2**20 leaves would take seconds to hash densely; sparse storage touches only 21 nodes.
    tree = MerkleTree.build(0, 0, 20, [(12345, "k", b"v")])
    assert tree.node_hash(20, tree.bucket(12345)) != EMPTY_HASH
