"""Merkle trees over one token range, and how a tree answers a probe about itself.

This module owns the tree's shape and hashing, a reference tree (`MerkleTree`, built from
entries and kept up to date in place), and the responder's half of the comparison two replicas
run for anti-entropy (`HashProbe` in, `ProbeReply` out); the initiator's half and the outcome are
in `merkle_diff`. It knows nothing of values or storage: each entry is ``(token, key, digest)``
where the caller's digest summarises the key's versions on this replica, so two replicas agree
on a key exactly when their digests are equal.

Shape (Dynamo §4.7, Cassandra's `MerkleTree`): a tree covers the ring arc ``(lo, hi]`` of the
32-bit ring (it wraps past 2**32-1 when ``lo >= hi``; ``lo == hi`` is the whole ring) and has
depth d. Level 0 is the root; level d holds 2**d leaf buckets, and node ``(level, i)`` has children
``(level + 1, 2i)`` and ``(level + 1, 2i + 1)``. A token's offset inside the arc maps linearly onto
the buckets, so each node covers a contiguous sub-arc (`node_arc`).

Hashing: each entry has a 128-bit hash of its (key, digest) (`entry_hash`, BLAKE2b), and a node's
hash is the XOR of the entry hashes under it (an empty node hashes to zero). XOR makes a node's
hash a function of the set of entries in its sub-arc alone, whatever the tree: so a hash index
kept up to date on every write (`token_hashes`) can answer for any node of any range's tree
without building it, and equal sets of entries give equal hashes on every replica.

Answering: the initiator sends its hashes for a frontier of nodes (`HashProbe`); `answer` says
which of them differ from the responder's tree (`ProbeReply`), and at the leaf level also returns
the responder's entries of the differing leaves, from which the initiator derives the differing
keys. Any `HashTree` can answer: the reference tree here or a view of the hash index.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

RING_SIZE = 1 << 32
HASH_SIZE = 16
MAX_DEPTH = 24  # 16M leaves: beyond any sensible use, and keeps indexes small on the wire

Entry = tuple[int, str, bytes]

EMPTY_HASH = bytes(HASH_SIZE)
"""The hash of a node with no entries under it."""


def entry_hash(key: str, digest: bytes) -> int:
    """One entry's contribution to every node above it, as a 128-bit integer to XOR."""
    # Length prefixes make the encoding unambiguous: ("ab", "c") never hashes as ("a", "bc").
    raw = key.encode("utf-8", "surrogatepass")
    h = hashlib.blake2b(len(raw).to_bytes(4, "big") + raw, digest_size=HASH_SIZE, person=b"bhandar-leaf")
    h.update(digest)
    return int.from_bytes(h.digest(), "big")


def as_hash(folded: int) -> bytes:
    """A node's hash on the wire: the XOR of its entry hashes, big-endian."""
    return folded.to_bytes(HASH_SIZE, "big")


def range_size(lo: int, hi: int) -> int:
    """The number of tokens in the arc (lo, hi]; lo == hi is the whole ring."""
    return (hi - lo) % RING_SIZE or RING_SIZE


def check_shape(lo: int, hi: int, depth: int) -> None:
    """Raise ValueError unless (lo, hi] and depth describe a tree."""
    if not (0 <= lo < RING_SIZE and 0 <= hi < RING_SIZE):
        raise ValueError(f"range bounds must be 32-bit tokens, got ({lo}, {hi}]")
    if not 0 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be in 0..{MAX_DEPTH}, got {depth}")


def node_arc(lo: int, hi: int, depth: int, level: int, index: int) -> tuple[int, int] | None:
    """The arc (lo, hi] of tokens under node (level, index) of the tree over (lo, hi] of `depth`,
    or None when it holds no token (possible when the range has fewer tokens than leaves)."""
    if not 0 <= level <= depth or not 0 <= index < (1 << level):
        raise ValueError(f"no node ({level}, {index}) in a tree of depth {depth}")
    size = range_size(lo, hi)
    height = depth - level
    # Offsets in leaf b are those with b <= offset * L / size < b + 1, with L leaves.
    leaves = 1 << depth
    first = -(-(index << height) * size // leaves)
    end = -(-((index + 1) << height) * size // leaves)
    if first >= end:
        return None
    return ((lo + first) % RING_SIZE, (lo + end) % RING_SIZE)


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


class HashTree(Protocol):
    """What a comparison needs of a tree: its shape, node hashes and leaf entries."""

    @property
    def lo(self) -> int: ...
    @property
    def hi(self) -> int: ...
    @property
    def depth(self) -> int: ...
    def node_hash(self, level: int, index: int) -> bytes: ...
    def leaf_entries(self, index: int) -> dict[str, bytes]:
        """One leaf's entries, key → digest."""
        ...


def answer(tree: HashTree, probe: HashProbe) -> ProbeReply:
    """The responder's half of the diff protocol: which probed nodes differ from `tree`'s."""
    if (probe.lo, probe.hi, probe.depth) != (tree.lo, tree.hi, tree.depth):
        raise ValueError(
            f"tree mismatch: probe for ({probe.lo}, {probe.hi}] depth {probe.depth}, "
            f"this tree is ({tree.lo}, {tree.hi}] depth {tree.depth}"
        )
    if len(probe.indexes) != len(probe.hashes):
        raise ValueError("probe has a different number of indexes and hashes")
    differing = tuple(
        i for i, h in zip(probe.indexes, probe.hashes, strict=True) if tree.node_hash(probe.level, i) != h
    )
    if probe.level < tree.depth:
        return ProbeReply(probe.level, differing)
    return ProbeReply(probe.level, differing, {i: tree.leaf_entries(i) for i in differing})


class MerkleTree:
    """A Merkle tree over the arc (lo, hi] of the ring; see the module docstring for the shape."""

    def __init__(self, lo: int, hi: int, depth: int) -> None:
        """An empty tree; add entries with `update` or use `build`."""
        check_shape(lo, hi, depth)
        self.lo = lo
        self.hi = hi
        self.depth = depth
        self.size = range_size(lo, hi)
        # Sparse storage: _folded[level] holds only nodes with entries under them.
        self._folded: list[dict[int, int]] = [{} for _ in range(depth + 1)]
        self._leaves: dict[int, dict[str, bytes]] = {}
        self._tokens: dict[str, int] = {}

    @classmethod
    def build(cls, lo: int, hi: int, depth: int, entries: Iterable[Entry]) -> MerkleTree:
        """A tree holding `entries`; a key may appear only once."""
        tree = cls(lo, hi, depth)
        for token, key, digest in entries:
            if key in tree._tokens:
                raise ValueError(f"key {key!r} appears twice")
            tree.update(token, key, digest)
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
        """The arc (lo, hi] of tokens under node (level, index), or None when it holds no token."""
        return node_arc(self.lo, self.hi, self.depth, level, index)

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
        return as_hash(self._folded[level].get(index, 0))

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

    def answer(self, probe: HashProbe) -> ProbeReply:
        """The responder's half of the diff protocol (see `answer`)."""
        return answer(self, probe)

    # ------------------------------------------------------------------------------- incremental upkeep

    def update(self, token: int, key: str, digest: bytes) -> None:
        """Insert or replace `key`'s digest, folding the change into its leaf and ancestors."""
        known = self._tokens.get(key)
        if known is not None and known != token:
            # A key's token is a hash of the key; a different one means a caller bug.
            raise ValueError(f"key {key!r} is at token {known}, not {token}")
        index = self.bucket(token)
        bucket = self._leaves.setdefault(index, {})
        old = bucket.get(key)
        if old == digest:
            return
        change = entry_hash(key, digest) ^ (0 if old is None else entry_hash(key, old))
        bucket[key] = digest
        self._tokens[key] = token
        self._fold(index, change)

    def remove(self, token: int, key: str) -> bool:
        """Drop `key` (folding it out of its path); False when it was not in the tree."""
        known = self._tokens.get(key)
        if known is None:
            return False
        if known != token:
            raise ValueError(f"key {key!r} is at token {known}, not {token}")
        index = self.bucket(token)
        del self._tokens[key]
        bucket = self._leaves[index]
        old = bucket.pop(key)
        if not bucket:
            del self._leaves[index]
        self._fold(index, entry_hash(key, old))
        return True

    def _fold(self, leaf: int, change: int) -> None:
        index = leaf
        for level in range(self.depth, -1, -1):
            nodes = self._folded[level]
            folded = nodes.get(index, 0) ^ change
            if folded:
                nodes[index] = folded
            else:
                nodes.pop(index, None)  # back to empty: implied by the default
            index >>= 1
