"""The Merkle tree of one range read from a keyspace's hash index: no build, no scan.

A `RangeTree` has the shape of `merkle.MerkleTree(lo, hi, depth)` and gives the same node hashes
and leaf entries as one built from the same entries, but reads each from the index when asked
(`TokenHashes.arc_hash`, `TokenHashes.entries`). It is a live view: a write to the index shows in
the next answer, which a comparison tolerates (a change in mid-session shows up as a difference
now or in the next round).
"""

from __future__ import annotations

from bhandar_cli.core.repair.merkle import (
    EMPTY_HASH,
    HashProbe,
    ProbeReply,
    answer,
    as_hash,
    check_shape,
    node_arc,
)
from bhandar_cli.core.repair.token_hashes import TokenHashes


class RangeTree:
    """The tree over (lo, hi] of `depth`, as a view of `hashes`."""

    def __init__(self, hashes: TokenHashes, lo: int, hi: int, depth: int) -> None:
        check_shape(lo, hi, depth)
        self.hashes = hashes
        self.lo = lo
        self.hi = hi
        self.depth = depth

    @property
    def root(self) -> bytes:
        return self.node_hash(0, 0)

    def node_hash(self, level: int, index: int) -> bytes:
        arc = node_arc(self.lo, self.hi, self.depth, level, index)
        return EMPTY_HASH if arc is None else as_hash(self.hashes.arc_hash(*arc))

    def leaf_entries(self, index: int) -> dict[str, bytes]:
        arc = node_arc(self.lo, self.hi, self.depth, self.depth, index)
        return {} if arc is None else {key: d for _, key, d in self.hashes.entries(*arc)}

    def answer(self, probe: HashProbe) -> ProbeReply:
        """The responder's half of the diff protocol (see `merkle.answer`)."""
        return answer(self, probe)
