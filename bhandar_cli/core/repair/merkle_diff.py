"""The initiator's half of a Merkle comparison, its outcome, and how to draw it.

Comparison is a conversation, so it can run between two nodes over messages: the initiator
(`DiffSession`) sends its hashes for a frontier of nodes (`merkle.HashProbe`), the responder
answers which ones differ (`merkle.answer`, a `merkle.ProbeReply`); the next frontier is the
children of those. At the leaf level the responder also returns its entries of the differing
leaves, and the initiator derives the differing keys (`MerkleDiff`). Only differing subtrees are
descended and only differing leaves are exchanged. `diff(a, b)` runs that conversation in-process,
and `render_lines` draws what it visited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bhandar_cli.core.repair.merkle import HashProbe, HashTree, MerkleTree, ProbeReply


@dataclass(frozen=True)
class NodeRef:
    """One node of a tree as the comparison visited it."""

    level: int
    index: int
    equal: bool


@dataclass(frozen=True)
class MerkleDiff:
    """The outcome of comparing a local tree (`a`) with a remote one (`b`)."""

    depth: int
    differing_leaves: tuple[int, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    changed: tuple[str, ...]
    """Keys on both sides with different digests."""
    leaf_keys: Mapping[int, tuple[str, ...]]
    """The differing keys of each differing leaf."""
    hashes_compared: int
    leaves_exchanged: int
    round_trips: int
    visited: tuple[NodeRef, ...]
    """Every node compared, level by level, with whether the two sides agreed."""

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key that needs repair, sorted."""
        return tuple(sorted((*self.only_in_a, *self.only_in_b, *self.changed)))

    @property
    def equal(self) -> bool:
        return not self.differing_leaves


class DiffSession:
    """The initiator's half of the diff protocol, as a state machine driven by replies.

    ``probe = session.start()``; then, while `probe` is not None, send it, feed the peer's
    `ProbeReply` to ``probe = session.receive(reply)``; finally read `session.result()`.
    The responder only needs its own tree: ``reply = merkle.answer(tree, probe)``.
    """

    def __init__(self, tree: HashTree) -> None:
        self.tree = tree
        self._probe: HashProbe | None = None
        self._visited: list[NodeRef] = []
        self._compared = 0
        self._round_trips = 0
        self._result: MerkleDiff | None = None

    def start(self) -> HashProbe:
        if self._probe is not None or self._result is not None:
            raise RuntimeError("session already started")
        self._probe = self._make_probe(0, (0,))
        return self._probe

    def _make_probe(self, level: int, indexes: tuple[int, ...]) -> HashProbe:
        t = self.tree
        return HashProbe(t.lo, t.hi, t.depth, level, indexes, tuple(t.node_hash(level, i) for i in indexes))

    def receive(self, reply: ProbeReply) -> HashProbe | None:
        """Take the peer's reply; return the next probe, or None when the comparison is done."""
        probe = self._probe
        if probe is None:
            raise RuntimeError("no probe outstanding")
        if reply.level != probe.level or not set(reply.differing) <= set(probe.indexes):
            raise ValueError("reply does not answer the outstanding probe")
        self._round_trips += 1
        self._compared += len(probe.indexes)
        differing = set(reply.differing)
        self._visited.extend(NodeRef(probe.level, i, i not in differing) for i in probe.indexes)
        if probe.level < self.tree.depth and differing:
            children = tuple(c for i in sorted(differing) for c in (2 * i, 2 * i + 1))
            self._probe = self._make_probe(probe.level + 1, children)
            return self._probe
        self._probe = None
        self._finish(reply if probe.level == self.tree.depth else ProbeReply(probe.level, ()))
        return None

    def _finish(self, reply: ProbeReply) -> None:
        only_a: list[str] = []
        only_b: list[str] = []
        changed: list[str] = []
        leaf_keys: dict[int, tuple[str, ...]] = {}
        if set(reply.leaves) != set(reply.differing):
            raise ValueError("leaf reply must carry the entries of exactly the differing leaves")
        for index in sorted(reply.differing):
            mine = self.tree.leaf_entries(index)
            theirs = reply.leaves[index]
            differing = [k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k)]
            leaf_keys[index] = tuple(sorted(differing))
            only_a.extend(k for k in differing if k not in theirs)
            only_b.extend(k for k in differing if k not in mine)
            changed.extend(k for k in differing if k in mine and k in theirs)
        self._result = MerkleDiff(
            depth=self.tree.depth,
            differing_leaves=tuple(sorted(reply.differing)),
            only_in_a=tuple(sorted(only_a)),
            only_in_b=tuple(sorted(only_b)),
            changed=tuple(sorted(changed)),
            leaf_keys=leaf_keys,
            hashes_compared=self._compared,
            leaves_exchanged=len(reply.leaves),
            round_trips=self._round_trips,
            visited=tuple(self._visited),
        )

    def result(self) -> MerkleDiff:
        if self._result is None:
            raise RuntimeError("comparison not finished")
        return self._result


def diff(a: MerkleTree, b: MerkleTree) -> MerkleDiff:
    """Compare two trees of the same shape in-process, through the same protocol two nodes use."""
    session = DiffSession(a)
    probe: HashProbe | None = session.start()
    while probe is not None:
        probe = session.receive(b.answer(probe))
    return session.result()


def render_lines(result: MerkleDiff, *, marks: tuple[str, str] = ("=", "≠")) -> list[str]:
    """The visited part of the tree, depth first, one node per line, indented by level and marked
    equal or differing; a differing leaf lists its differing keys. Plain text: views add colour."""
    by_node = {(ref.level, ref.index): ref.equal for ref in result.visited}
    lines: list[str] = []
    stack = [(0, 0)]
    while stack:
        level, index = stack.pop()
        equal = by_node.get((level, index))
        if equal is None:
            continue
        line = f"{'  ' * level}{marks[0] if equal else marks[1]} L{level} #{index}"
        if level == result.depth and not equal:
            line += f"  keys: {', '.join(result.leaf_keys.get(index, ()))}"
        lines.append(line)
        if level < result.depth:
            stack.extend(((level + 1, 2 * index + 1), (level + 1, 2 * index)))
    return lines
