"""The hash index kept on every write gives the trees a fresh build from the store would give."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.record_digest import digest
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.core.repair.hash_index import STAGED_BYTES, HashIndex
from bhandar_cli.core.repair.indexed_store import IndexedStore
from bhandar_cli.core.repair.merkle import RING_SIZE, HashProbe, MerkleTree, answer
from bhandar_cli.core.repair.merkle_diff import DiffSession
from bhandar_cli.core.repair.range_tree import RangeTree
from bhandar_cli.core.repair.reaping import is_tombstone
from bhandar_cli.core.repair.token_hashes import STAGED_MAX, TokenHashes
from tests.support.record_samples import versioned

KEYSPACES = ("ks", "other")
keys = st.text(alphabet="abcxyz", min_size=1, max_size=3)
tombstone = Versioned((Sibling(("A", 1), {}, None, "", 1.0),))
records = versioned() | st.just(tombstone)
writes = st.lists(st.tuples(st.sampled_from(KEYSPACES), keys, st.none() | records), max_size=60)


def fresh_tree(store: MemoryStore, keyspace: str, lo: int, hi: int, depth: int) -> MerkleTree:
    """What the index must agree with: a tree built from a full scan of the store."""
    tree = MerkleTree(lo, hi, depth)
    for key, record in store.items(keyspace):
        token = key_token(keyspace, key)
        if tree.contains(token):
            tree.update(token, key, digest(record))
    return tree


@st.composite
def arcs(draw: st.DrawFn, tokens: list[int]) -> tuple[int, int]:
    """Ranges whose edges fall next to, on and away from the keys' tokens (edge buckets matter)."""
    near = st.sampled_from(tokens).flatmap(lambda t: st.integers(-3, 3).map(lambda d: (t + d) % RING_SIZE))
    point = near if tokens else st.integers(0, RING_SIZE - 1)
    lo = draw(point | st.integers(0, RING_SIZE - 1))
    hi = draw(point | st.integers(0, RING_SIZE - 1) | st.just(lo))
    return lo, hi


@settings(max_examples=150, deadline=None)
@given(writes, st.booleans(), st.data())
def test_index_trees_equal_a_fresh_build_after_writes_and_deletes(
    ops: list[tuple[str, str, Versioned | None]], build_first: bool, data: st.DataObject
) -> None:
    raw = MemoryStore()
    index = HashIndex(raw)
    store = IndexedStore(raw, index)
    if build_first:  # built before the writes (kept up by them) or after (built by a scan)
        for ks in KEYSPACES:
            index.space(ks)
    for ks, key, record in ops:
        if record is None:
            store.remove(ks, key)
        else:
            store.put(ks, key, record)
    for ks in KEYSPACES:
        space = index.space(ks)
        held = dict(raw.items(ks))
        assert len(space) == len(held)
        assert space.tombstones(0, 0) == {k: digest(r) for k, r in held.items() if is_tombstone(r)}
        tokens = [key_token(ks, k) for k in held]
        for _ in range(3):
            lo, hi = data.draw(arcs(tokens))
            depth = data.draw(st.integers(0, 5))
            view, fresh = RangeTree(space, lo, hi, depth), fresh_tree(raw, ks, lo, hi, depth)
            for level in range(depth + 1):
                for i in range(1 << level):
                    assert view.node_hash(level, i) == fresh.node_hash(level, i)
            for i in range(1 << depth):
                assert view.leaf_entries(i) == fresh.leaf_entries(i)
            assert sorted(space.entries(lo, hi)) == sorted(fresh.entries())
            in_range = {k for _, k, _ in fresh.entries()}
            assert space.tombstones(lo, hi) == {
                k: d for k, d in space.tombstones(0, 0).items() if k in in_range
            }


def test_a_comparison_of_two_indexes_finds_exactly_the_differing_keys() -> None:
    a_raw, b_raw = MemoryStore(), MemoryStore()
    a, b = HashIndex(a_raw), HashIndex(b_raw)
    a_store, b_store = IndexedStore(a_raw, a), IndexedStore(b_raw, b)
    one = Versioned((Sibling(("A", 1), {}, b"1", "", 1.0),))
    two = Versioned((Sibling(("A", 2), {}, b"2", "", 2.0),))
    for i in range(500):
        a_store.put("ks", f"k{i}", one)
        b_store.put("ks", f"k{i}", one)
    b_store.put("ks", "k7", two)
    a_store.remove("ks", "k9")
    b_store.put("ks", "new", one)
    lo, hi = 12345, 12345  # the whole ring
    session = DiffSession(RangeTree(a.space("ks"), lo, hi, 6))
    probe: HashProbe | None = session.start()
    peer = RangeTree(b.space("ks"), lo, hi, 6)
    while probe is not None:
        probe = session.receive(answer(peer, probe))
    assert session.result().keys == ("k7", "k9", "new")
    # Writing the same record again changes nothing; undoing the differences makes roots equal.
    b_store.put("ks", "k7", one)
    b_store.remove("ks", "new")
    a_store.put("ks", "k9", one)
    assert RangeTree(a.space("ks"), lo, hi, 6).root == peer.root


def test_forgotten_keyspaces_are_rebuilt_from_what_the_store_holds() -> None:
    raw = MemoryStore()
    index = HashIndex(raw)
    store = IndexedStore(raw, index)
    record = Versioned((Sibling(("A", 1), {}, b"1", "", 1.0),))
    store.put("ks", "a", record)
    assert len(index.space("ks")) == 1
    raw.remove("ks", "a")  # lost behind the index's back, as disk damage loses records
    assert len(index.space("ks")) == 1
    index.forget(["ks"])
    assert len(index.space("ks")) == 0


def test_a_write_is_hashed_when_the_index_is_next_read_and_only_its_last_record() -> None:
    described: list[Versioned] = []

    def describe(record: Versioned) -> tuple[bytes, bool]:
        described.append(record)
        return digest(record), is_tombstone(record)

    space = TokenHashes("ks", describe)
    records = [Versioned((Sibling(("A", i), {}, str(i).encode(), "", float(i)),)) for i in range(1, 6)]
    for record in records:
        space.stage("k", record)  # one key written five times between two reads
    space.stage("gone", records[0])
    space.remove("gone")
    assert described == []
    assert len(space) == 1 and described == [records[-1]]
    assert list(space.entries(0, 0)) == [(key_token("ks", "k"), "k", digest(records[-1]))]
    for i in range(STAGED_MAX):  # a bound on what waits: the writes are settled once it is reached
        space.stage(f"k{i}", records[0])
    assert len(described) == 1 + STAGED_MAX


def test_a_record_with_large_values_is_hashed_at_once() -> None:
    raw = MemoryStore()
    index = HashIndex(raw)
    store = IndexedStore(raw, index)
    space = index.space("ks")
    small = Versioned((Sibling(("A", 1), {}, b"x", "", 1.0),))
    large = Versioned((Sibling(("A", 2), {}, bytes(STAGED_BYTES + 1), "", 2.0),))
    store.put("ks", "small", small)
    store.put("ks", "large", large)
    assert list(space._staged) == ["small"]
    assert len(space) == 2 and not space._staged
