"""Merkle trees over one token range, and how a tree answers a probe about itself.

This module owns the tree (its buckets, hashes and incremental upkeep) and the responder's half
of the comparison two replicas run for anti-entropy (`HashProbe` in, `ProbeReply` out); the
initiator's half and the outcome are in `merkle_diff`. It knows nothing of values or storage:
each entry is ``(token, key, digest)`` where the caller's digest summarises the key's versions on
this replica, so two replicas agree on a key exactly when their digests are equal.

Shape (Dynamo §4.7, Cassandra's `MerkleTree`): a tree covers the ring arc ``(lo, hi]`` of the
32-bit ring (it wraps past 2**32-1 when ``lo >= hi``; ``lo == hi`` is the whole ring) and has
depth d. Level 0 is the root; level d holds 2**d leaf buckets, and node ``(level, i)`` has children
``(level + 1, 2i)`` and ``(level + 1, 2i + 1)``. A token's offset inside the arc maps linearly onto
the buckets, so each bucket is a contiguous sub-arc (`node_range`). A leaf hashes its sorted
``(key, digest)`` pairs, an inner node its two children's hashes (BLAKE2b, 16 bytes, with distinct
personalisations so a leaf can never pass for an inner node).

Storage is sparse: only non-empty subtrees are kept, an empty one has a per-level constant hash.
So building costs O(entries * depth) instead of O(2**depth), and a deep tree over a small range
is cheap. `update` / `remove` rehash one leaf and its d ancestors.

Answering: the initiator sends its hashes for a frontier of nodes (`HashProbe`); `answer` says
which of them differ from this tree (`ProbeReply`), and at the leaf level also returns this
tree's entries of the differing leaves, from which the initiator derives the differing keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

RING_SIZE = 1 << 32
HASH_SIZE = 16
MAX_DEPTH = 24  # 16M leaves: beyond any sensible use, and keeps indexes small on the wire

Entry = tuple[int, str, bytes]


def _leaf_hash(pairs: Iterable[tuple[str, bytes]]) -> bytes:
    h = hashlib.blake2b(digest_size=HASH_SIZE, person=b"bhandar-leaf")
    for key, digest in pairs:
        # Length prefixes make the encoding unambiguous: ("ab", "c") never hashes as ("a", "bc").
        raw = key.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(4, "big"))
        h.update(raw)
        h.update(len(digest).to_bytes(4, "big"))
        h.update(digest)
    return h.digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.blake2b(left + right, digest_size=HASH_SIZE, person=b"bhandar-node").digest()


EMPTY_LEAF_HASH = _leaf_hash(())
"""The hash of a bucket with no entries."""

# _EMPTY[h] is the hash of an empty subtree of height h (h = depth - level).
_EMPTY: list[bytes] = [EMPTY_LEAF_HASH]
for _ in range(MAX_DEPTH):
    _EMPTY.append(_node_hash(_EMPTY[-1], _EMPTY[-1]))


def range_size(lo: int, hi: int) -> int:
    """The number of tokens in the arc (lo, hi]; lo == hi is the whole ring."""
    return (hi - lo) % RING_SIZE or RING_SIZE


@dataclass(frozen=True)
class HashProbe:
    """Initiator → responder: "here are my hashes of these nodes at `level`; which differ?"

    `lo`, `hi` and `depth` identify the tree shape so mismatched trees fail loudly.
    """

    lo: int
    hi: int
    depth: int
    level: int
    indexes: tuple[int, ...]
    hashes: tuple[bytes, ...]


@dataclass(frozen=True)
class ProbeReply:
    """Responder → initiator: the probed indexes whose hashes differ, and, when the probe was at
    the leaf level, the responder's entries of exactly those leaves."""

    level: int
    differing: tuple[int, ...]
    leaves: Mapping[int, Mapping[str, bytes]] = field(default_factory=dict)


class MerkleTree:
    """A Merkle tree over the arc (lo, hi] of the ring; see the module docstring for the shape."""

    def __init__(self, lo: int, hi: int, depth: int) -> None:
        """An empty tree; add entries with `update` or use `build`."""
        if not (0 <= lo < RING_SIZE and 0 <= hi < RING_SIZE):
            raise ValueError(f"range bounds must be 32-bit tokens, got ({lo}, {hi}]")
        if not 0 <= depth <= MAX_DEPTH:
            raise ValueError(f"depth must be in 0..{MAX_DEPTH}, got {depth}")
        self.lo = lo
        self.hi = hi
        self.depth = depth
        self.size = range_size(lo, hi)
        # Sparse storage: _hashes[level] holds only nodes whose subtree is not empty.
        self._hashes: list[dict[int, bytes]] = [{} for _ in range(depth + 1)]
        self._leaves: dict[int, dict[str, bytes]] = {}
        self._tokens: dict[str, int] = {}

    @classmethod
    def build(cls, lo: int, hi: int, depth: int, entries: Iterable[Entry]) -> MerkleTree:
        """A tree holding `entries`; a key may appear only once."""
        tree = cls(lo, hi, depth)
        for token, key, digest in entries:
            if key in tree._tokens:
                raise ValueError(f"key {key!r} appears twice")
            tree._tokens[key] = token
            tree._leaves.setdefault(tree.bucket(token), {})[key] = digest
        # Hash bottom-up once, instead of walking to the root for every entry.
        leaf_level = tree._hashes[depth]
        for index, bucket in tree._leaves.items():
            leaf_level[index] = _leaf_hash(sorted(bucket.items()))
        for level in range(depth - 1, -1, -1):
            for parent in {i >> 1 for i in tree._hashes[level + 1]}:
                tree._rehash(level, parent)
        return tree

    # ------------------------------------------------------------------------------- shape

    def contains(self, token: int) -> bool:
        """Whether `token` lies in the tree's arc (lo, hi]."""
        return 0 <= token < RING_SIZE and (token - self.lo - 1) % RING_SIZE < self.size

    def bucket(self, token: int) -> int:
        """The leaf index of `token`: its offset in the arc scaled linearly onto 2**depth buckets."""
        if not self.contains(token):
            raise ValueError(f"token {token} is outside the range ({self.lo}, {self.hi}]")
        offset = (token - self.lo - 1) % RING_SIZE
        return (offset << self.depth) // self.size

    def node_range(self, level: int, index: int) -> tuple[int, int] | None:
        """The arc (lo, hi] of tokens under node (level, index), or None when it holds no token
        (possible when the range has fewer tokens than there are leaves)."""
        self._check_node(level, index)
        height = self.depth - level
        first_leaf, end_leaf = index << height, (index + 1) << height
        # Offsets in leaf b are those with b <= offset * L / size < b + 1, with L leaves.
        leaves = 1 << self.depth
        first = -(-first_leaf * self.size // leaves)
        end = -(-end_leaf * self.size // leaves)
        if first >= end:
            return None
        return ((self.lo + first) % RING_SIZE, (self.lo + end) % RING_SIZE)

    def children(self, level: int, index: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """The (level, index) pairs of a node's two children."""
        self._check_node(level, index)
        if level == self.depth:
            raise ValueError("a leaf has no children")
        return (level + 1, 2 * index), (level + 1, 2 * index + 1)

    def _check_node(self, level: int, index: int) -> None:
        if not 0 <= level <= self.depth or not 0 <= index < (1 << level):
            raise ValueError(f"no node ({level}, {index}) in a tree of depth {self.depth}")

    # ------------------------------------------------------------------------------- hashes and entries

    @property
    def root(self) -> bytes:
        return self.node_hash(0, 0)

    def node_hash(self, level: int, index: int) -> bytes:
        self._check_node(level, index)
        return self._hashes[level].get(index, _EMPTY[self.depth - level])

    def leaf_entries(self, index: int) -> dict[str, bytes]:
        """A copy of one bucket's entries, key → digest."""
        self._check_node(self.depth, index)
        return dict(self._leaves.get(index, {}))

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, key: object) -> bool:
        return key in self._tokens

    def digest(self, key: str) -> bytes | None:
        """The digest stored for `key`, or None."""
        token = self._tokens.get(key)
        return None if token is None else self._leaves[self.bucket(token)][key]

    def entries(self) -> Iterator[Entry]:
        """Every (token, key, digest), in bucket order (and key order within a bucket)."""
        for index in sorted(self._leaves):
            for key, digest in sorted(self._leaves[index].items()):
                yield self._tokens[key], key, digest

    # ------------------------------------------------------------------------------- incremental upkeep

    def update(self, token: int, key: str, digest: bytes) -> None:
        """Insert or replace `key`'s digest, rehashing only the path from its leaf to the root."""
        known = self._tokens.get(key)
        if known is not None and known != token:
            # A key's token is a hash of the key; a different one means a caller bug.
            raise ValueError(f"key {key!r} is at token {known}, not {token}")
        index = self.bucket(token)
        bucket = self._leaves.setdefault(index, {})
        if bucket.get(key) == digest:
            return
        bucket[key] = digest
        self._tokens[key] = token
        self._rehash_path(index)

    def remove(self, token: int, key: str) -> bool:
        """Drop `key` (rehashing its path); False when it was not in the tree."""
        known = self._tokens.get(key)
        if known is None:
            return False
        if known != token:
            raise ValueError(f"key {key!r} is at token {known}, not {token}")
        index = self.bucket(token)
        del self._tokens[key]
        bucket = self._leaves[index]
        del bucket[key]
        if not bucket:
            del self._leaves[index]
        self._rehash_path(index)
        return True

    def _rehash_path(self, leaf: int) -> None:
        bucket = self._leaves.get(leaf)
        if bucket:
            self._hashes[self.depth][leaf] = _leaf_hash(sorted(bucket.items()))
        else:
            self._hashes[self.depth].pop(leaf, None)
        index = leaf
        for level in range(self.depth - 1, -1, -1):
            index >>= 1
            self._rehash(level, index)

    def _rehash(self, level: int, index: int) -> None:
        below = self._hashes[level + 1]
        if 2 * index not in below and 2 * index + 1 not in below:
            self._hashes[level].pop(index, None)  # an empty subtree: implied by _EMPTY
            return
        empty = _EMPTY[self.depth - level - 1]
        self._hashes[level][index] = _node_hash(below.get(2 * index, empty), below.get(2 * index + 1, empty))

    # ------------------------------------------------------------------------------- responder side

    def answer(self, probe: HashProbe) -> ProbeReply:
        """The responder's half of the diff protocol: which probed nodes differ from ours."""
        if (probe.lo, probe.hi, probe.depth) != (self.lo, self.hi, self.depth):
            raise ValueError(
                f"tree mismatch: probe for ({probe.lo}, {probe.hi}] depth {probe.depth}, "
                f"this tree is ({self.lo}, {self.hi}] depth {self.depth}"
            )
        if len(probe.indexes) != len(probe.hashes):
            raise ValueError("probe has a different number of indexes and hashes")
        differing = tuple(
            i for i, h in zip(probe.indexes, probe.hashes, strict=True) if self.node_hash(probe.level, i) != h
        )
        if probe.level < self.depth:
            return ProbeReply(probe.level, differing)
        return ProbeReply(probe.level, differing, {i: self.leaf_entries(i) for i in differing})
