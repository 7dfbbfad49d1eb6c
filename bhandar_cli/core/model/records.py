"""What a replica stores under one key: siblings (for `siblings` and `lww`) or a PN-Counter.

Also the single merge entry point (`merge_records`, chosen by keyspace policy) and the plain form
of a record (lists, maps, strings, numbers, bytes), which node messages carry inside versioned
frames (`core/wire.py`) and the disk format wraps in its own versioned envelope
(`store/record_format.py`). Its layout is part of both: change it only with a new frame
protocol version and a new disk format version. The digest replicas compare has its own canonical
encoding, independent of both (`core/model/record_digest.py`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, final

from bhandar_cli.core.model.crdt import ActorCount, PNCounter
from bhandar_cli.core.model.versions import Sibling, lww_merge, merge_siblings


@final
class Versioned:
    """Siblings of a `siblings` or `lww` key, sorted by dot. Immutable, compared by value: a
    native class when compiled, as `Sibling` (core/model/versions.py says why)."""

    __match_args__: ClassVar = ("siblings",)
    __slots__ = ("siblings",)

    def __init__(self, siblings: tuple[Sibling, ...]) -> None:
        self.siblings: Final = siblings

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Versioned:
            return NotImplemented
        assert isinstance(other, Versioned)
        return self.siblings == other.siblings

    def __hash__(self) -> int:
        return hash((self.siblings,))

    def __repr__(self) -> str:
        return f"Versioned(siblings={self.siblings!r})"

    def __reduce__(self) -> tuple[type[Versioned], tuple[tuple[Sibling, ...]]]:
        return (Versioned, (self.siblings,))  # for copy and pickle, as Sibling's


Record = Versioned | PNCounter


def merge_records(policy: str, a: Record | None, b: Record | None) -> Record | None:
    if a is None:
        return b
    if b is None or a is b:
        return a
    if isinstance(a, PNCounter) and isinstance(b, PNCounter):
        return a.merge(b)
    if isinstance(a, Versioned) and isinstance(b, Versioned):
        if policy == "lww":
            return Versioned(lww_merge(a.siblings, b.siblings))
        # Fast paths, taken by about two merges in three (a replica that already holds what it is
        # sent, a reply that adds nothing). They rely on every record the store builds being the
        # output of a merge: one sibling per dot, none covered by another's context. If one
        # record's dots are a subset of the other's, the union is the larger record, and no
        # context in it covers a sibling of it, so the merge is the larger record itself.
        # A void beside a copy of its dot (exact_dots.py, rare) needs the full merge, where it wins.
        if a.siblings == b.siblings:
            return a
        a_dots = {s.dot: s.ctype for s in a.siblings}
        if len(a_dots) >= len(b.siblings) and all(a_dots.get(s.dot) == s.ctype for s in b.siblings):
            return a
        if len(a_dots) <= len(b.siblings):
            b_dots = {s.dot: s.ctype for s in b.siblings}
            if all(b_dots.get(dot) == ctype for dot, ctype in a_dots.items()):
                return b
        return Versioned(merge_siblings(a.siblings, b.siblings))
    raise TypeError(f"cannot merge a {type(a).__name__} with a {type(b).__name__} (keyspace policy {policy})")


def same_record(a: Record | None, b: Record | None) -> bool:
    """Structural equality (what read repair and convergence checks compare)."""
    return a == b  # frozen dataclasses of tuples and dicts compare by value


# --- plain form ----------------------------------------------------------------------------


def to_plain(record: Record) -> list[Any]:
    """A CBOR-friendly form: ["v", [sibling...]] or ["c", {actor: [p, n, seq, [[id, delta]...]]}]."""
    if isinstance(record, Versioned):
        return [
            "v",
            [
                [s.dot[0], s.dot[1], dict(sorted(s.context.items())), s.value, s.ctype, s.ts]
                for s in record.siblings
            ],
        ]
    return [
        "c",
        {a: [e.p, e.n, e.seq, list(map(list, e.ids))] for a, e in sorted(record.actors.items())},
    ]


def from_plain(data: Any) -> Record:
    """Inverse of `to_plain`; raises ValueError on anything malformed."""
    try:
        kind, body = data
        if kind == "v":
            sibs = [
                Sibling(
                    (str(actor), int(counter)),
                    _context(context),
                    _value_bytes(value),
                    str(ctype),
                    float(ts),
                )
                for actor, counter, context, value, ctype, ts in body
            ]
            return Versioned(tuple(sibs))
        if kind == "c":
            return PNCounter(
                {
                    str(a): ActorCount(int(p), int(n), int(seq), _request_ids(ids))
                    for a, (p, n, seq, ids) in body.items()
                }
            )
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"malformed record: {exc}") from exc
    raise ValueError(f"malformed record: unknown kind {kind!r}")


def _context(context: Any) -> dict[str, int]:
    """A sibling's decoded context: nearly always a dict of str to int already, made by the decoder
    for this record alone, so it is taken as it is (no second dict per sibling)."""
    if context.__class__ is dict:
        for k, v in context.items():
            if k.__class__ is not str or v.__class__ is not int:
                break
        else:
            return context
    return {str(k): int(v) for k, v in context.items()}


def _request_ids(ids: Any) -> tuple[tuple[str, int], ...]:
    """A counter entry's (request id, delta) pairs: a decoded record holds up to a thousand per
    actor, nearly always of the right types already, so those are taken as they are."""
    pairs = tuple(map(tuple, ids))
    for request_id, delta in pairs:
        if request_id.__class__ is not str or delta.__class__ is not int:
            return tuple([(str(r), int(d)) for r, d in pairs])
    return pairs


def _value_bytes(value: Any) -> bytes | None:
    # Strictly bytes: `bytes(n)` of an int from a peer would allocate n zero bytes (2^62: MemoryError).
    if value is None or isinstance(value, bytes):
        return value
    raise ValueError(f"a sibling's value must be bytes or null, not {type(value).__name__}")
