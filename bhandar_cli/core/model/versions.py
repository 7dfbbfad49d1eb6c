"""Dotted version vectors: siblings, causal contexts with their dot cloud, merge and LWW.

Every write gets a *dot* (actor, counter) and carries the *context* the client read before writing.
A sibling is obsolete exactly when another sibling's context covers its dot. Two writes with the
same context through the same coordinator get different dots, so both survive as siblings (a bare
vector-clock increment would silently drop one: Riak's lesson).

Two kinds of actor mint dots, and a context counts each kind its own way:

- A *home* actor (a node id, or its later name after a restore: `A`, `A~r1`) is a home replica
  coordinating the key. Its counter comes from its lease (core/roles/dot_lease.py), one sequence
  for every key, above anything the key's record or the write's context claims of it. Replicas always
  receive the coordinator's whole merged record, never a lone sibling, so a record that knows (A, n)
  also holds or covers every earlier A-dot of that key: the context entry `A: n` claims them all.
- An *exact* actor (`A~x`, `A~x7`: `exact_actor`) is a node minting a dot for a key it does not
  hold: a put it forwards (every coordinator that takes the put applies it under that one dot, so
  a put handed to a second coordinator is still one write), or a write it coordinates as a fallback.
  Its counters are dense per key (1, 2, 3, ...; core/roles/exact_dots.py), but its dots reach the
  replicas in any order, so a context names them as they are seen: the entry `A~x: n` means dots
  1..n, and a dot seen beyond that prefix is an entry of its own, `A~x:7: 7` (the *dot cloud* of
  delta-CRDT causal contexts). `join` folds a cloud dot into the prefix once the gap below it is
  seen. A context never claims an exact dot it has not seen, in any arrival order.

Merging is "union by dot, then drop what some other sibling's context covers". That is commutative,
associative and idempotent because coverage is judged against the whole union. Contexts are never
pruned: dropping an entry would let a value a client read and wrote over come back. They stay
bounded because every actor's dots fold into one entry: a key's context holds one entry per actor
that ever wrote it, plus, for a moment, exact dots that arrived ahead of an earlier one (each minted
exact dot is eventually stored, as the write or as a void: exact_dots.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import ClassVar, Final, final

Dot = tuple[str, int]
VersionVector = Mapping[str, int]

JSON = "application/json"
BYTES = "application/octet-stream"
# The content type of a void: the tombstone a forwarder stores under an exact dot whose put was
# never applied, so that no gap stays in the key's dots (core/roles/exact_dots.py). A void is
# nobody's write: it wins over a copy of the same dot (the put it stands for, refused), and reads
# show nothing of it but its dot in the context.
VOID = "bhandar/void"

SIBLING_WARN = 25
SIBLING_MAX = 100


@final
class Sibling:
    """One concurrent version of a key. `value is None` marks a tombstone (a delete).

    Immutable, compared and hashed by value. A plain class with an explicit constructor rather
    than a frozen dataclass: mypyc compiles it to a native class (C fields; a frozen dataclass's
    generated `__init__` stays a Python function that sets each field through `object.__setattr__`,
    about 17 times slower to build compiled: docs/performance.md, "Native core types"). Its
    fields, in order, are `__match_args__`; `__eq__`, `__hash__` and `__repr__` are those the
    dataclass had."""

    __match_args__: ClassVar = ("dot", "context", "value", "ctype", "ts")
    __slots__ = ("context", "ctype", "dot", "ts", "value")

    def __init__(
        self, dot: Dot, context: VersionVector, value: bytes | None, ctype: str = JSON, ts: float = 0.0
    ) -> None:
        self.dot: Final = dot
        self.context: Final = context
        self.value: Final = value
        self.ctype: Final = ctype
        self.ts: Final = ts

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Sibling:
            return NotImplemented
        assert isinstance(other, Sibling)
        return (self.dot, self.context, self.value, self.ctype, self.ts) == (
            other.dot,
            other.context,
            other.value,
            other.ctype,
            other.ts,
        )

    def __hash__(self) -> int:
        # As the frozen dataclass's: of every field (a context is a dict: unhashable, as it was).
        return hash((self.dot, self.context, self.value, self.ctype, self.ts))

    def __repr__(self) -> str:
        return (
            f"Sibling(dot={self.dot!r}, context={self.context!r}, value={self.value!r}, "
            f"ctype={self.ctype!r}, ts={self.ts!r})"
        )

    def __reduce__(self) -> tuple[type[Sibling], tuple[Dot, VersionVector, bytes | None, str, float]]:
        # How copy and pickle rebuild it: a compiled class has no __dict__ or slots for them to copy.
        return (Sibling, (self.dot, self.context, self.value, self.ctype, self.ts))

    def tombstoned(self) -> Sibling:
        """This version with its value dropped: a tombstone of the same dot, context and time."""
        return Sibling(self.dot, self.context, None, self.ctype, self.ts)

    @property
    def tombstone(self) -> bool:
        return self.value is None

    @property
    def void(self) -> bool:
        return self.ctype == VOID

    @property
    def clock(self) -> dict[str, int]:
        """The version vector of this sibling: its context plus its own dot."""
        clock = dict(self.context)
        add_dot(clock, self.dot)
        return clock


def exact_actor(actor: str, incarnation: int = 0) -> str:
    """The exact actor of the node whose home actor is `actor` (`A~x`), or a later one of the same
    node for one key (`A~x7`: exact_dots.py starts one after a crash left a dot of the key in flight)."""
    return f"{actor}~x{incarnation or ''}"


def is_exact(actor: str) -> bool:
    """Whether `actor` mints exact dots (counted dot by dot) rather than a home actor's chain."""
    cut = actor.rfind("~x")
    return cut > 0 and (cut + 2 == len(actor) or actor[cut + 2 :].isdigit())


def cloud_entry(dot: Dot) -> str:
    """The context entry naming one exact dot beyond its actor's prefix: `A~x:7` (value 7)."""
    return f"{dot[0]}:{dot[1]}"


def cloud_dot(entry: str) -> Dot | None:
    """The dot a context entry names alone (`A~x:7` -> ("A~x", 7)), or None for an actor's entry."""
    cut = entry.rfind(":")
    if cut < 0:
        return None
    return entry[:cut], int(entry[cut + 1 :])


def covers(context: VersionVector, dot: Dot) -> bool:
    actor, counter = dot
    if context.get(actor, 0) >= counter:
        return True
    return is_exact(actor) and context.get(f"{actor}:{counter}", 0) == counter


def add_dot(context: dict[str, int], dot: Dot) -> None:
    """Record in `context` that `dot` was seen: a home actor's counter rises to it; an exact dot
    extends its actor's prefix (taking in the cloud dots that now follow on) or joins the cloud."""
    actor, counter = dot
    have = context.get(actor, 0)
    if have >= counter:
        return
    if not is_exact(actor):
        context[actor] = counter
        return
    if counter != have + 1:
        context[f"{actor}:{counter}"] = counter
        return
    after = counter + 1
    while context.pop(f"{actor}:{after}", None) is not None:
        after += 1
    context[actor] = after - 1


def compact(context: dict[str, int]) -> dict[str, int]:
    """`context` with every cloud dot its actor's prefix covers dropped, and the prefix extended
    over the cloud dots that follow on from it (in place; returned for convenience)."""
    cloud = [entry for entry in context if ":" in entry]
    if not cloud:
        return context
    for entry in sorted(cloud, key=_cloud_order):
        dot = cloud_dot(entry)
        assert dot is not None
        if entry in context:
            del context[entry]
            add_dot(context, dot)
    return context


def _cloud_order(entry: str) -> tuple[str, int]:
    dot = cloud_dot(entry)
    assert dot is not None
    return dot


def merge_siblings(a: Iterable[Sibling], b: Iterable[Sibling]) -> tuple[Sibling, ...]:
    """Union by dot, then drop every sibling whose dot another sibling's context covers.

    Two siblings with one dot are one write, except a void: it wins over the write it stands for
    (a put refused under that dot: exact_dots.py), so the outcome does not depend on the order."""
    by_dot: dict[Dot, Sibling] = {s.dot: s for s in a}
    for s in b:
        held = by_dot.get(s.dot)
        if held is None or (held is not s and s.ctype == VOID and held.ctype != VOID):
            by_dot[s.dot] = s
    if len(by_dot) == 1:
        return tuple(by_dot.values())
    # Some context covers (actor, n) exactly when the join of all contexts does: one pass to build
    # the join, then one lookup per sibling (this is the hottest loop of the store). A cloud entry
    # is its own key of the join, so the lookup finds it too (`covers`).
    top: dict[str, int] = {}
    for s in by_dot.values():
        for actor, counter in s.context.items():
            if top.get(actor, 0) < counter:
                top[actor] = counter
    kept = [s for dot, s in by_dot.items() if not covers(top, dot)]
    kept.sort(key=_dot_order)
    return tuple(kept)


_dot_order = attrgetter("dot")


def lww_merge(a: Iterable[Sibling], b: Iterable[Sibling]) -> tuple[Sibling, ...]:
    """Last writer wins: one sibling, the greatest by (timestamp, actor, counter).

    Between two copies of the same write (same dot), the tombstone wins: in a keyspace with a ttl
    a replica turns an expired value into a tombstone of the same dot (core/roles/expiry.py), and a
    copy that has not expired it yet must never bring the value back."""
    best: Sibling | None = None
    for s in (*a, *b):
        if (
            best is None
            or (s.ts, s.dot) > (best.ts, best.dot)
            or (s.dot == best.dot and s.value is None and best.value is not None)
        ):
            best = s
    return () if best is None else (best,)


def join(vectors: Iterable[VersionVector]) -> dict[str, int]:
    """Everything any of `vectors` has seen: the entry-wise maximum, compacted."""
    out: dict[str, int] = {}
    for vector in vectors:
        for actor, counter in vector.items():
            if out.get(actor, 0) < counter:
                out[actor] = counter
    return compact(out)


def context_of(siblings: Iterable[Sibling]) -> dict[str, int]:
    """The causal context handed to a client: the join of every sibling's clock (tombstones too)."""
    return join(s.clock for s in siblings)


def next_dot(siblings: Iterable[Sibling], actor: str, context: VersionVector) -> Dot:
    """A fresh dot for `actor`, above every counter of `actor` in the record and the context."""
    top = context.get(actor, 0)
    for s in siblings:
        if s.dot[0] == actor and s.dot[1] > top:
            top = s.dot[1]
        seen = s.context.get(actor, 0)
        if seen > top:
            top = seen
    return (actor, top + 1)


def descends(a: VersionVector, b: VersionVector) -> bool:
    """a has seen everything b has (both compacted, as `join` leaves them)."""
    for entry, counter in b.items():
        dot = cloud_dot(entry)
        if dot is None:
            if a.get(entry, 0) < counter:
                return False
        elif not covers(a, dot):
            return False
    return True


def relation(a: VersionVector, b: VersionVector) -> str:
    """'equal', 'descends' (a after b), 'precedes' (a before b) or 'concurrent'."""
    ab, ba = descends(a, b), descends(b, a)
    if ab and ba:
        return "equal"
    if ab:
        return "descends"
    if ba:
        return "precedes"
    return "concurrent"


def live_values(siblings: Iterable[Sibling]) -> list[Sibling]:
    return [s for s in siblings if s.value is not None]


def show_clock(vector: VersionVector) -> str:
    """`{A:2, B:1}`, as the seed prints clocks; an exact actor's cloud dots follow its prefix as
    `+n` (`E~x:3+7`: E~x's dots 1 to 3, and 7)."""
    parts: dict[str, str] = {}
    for entry in sorted(vector, key=_show_order):
        dot = cloud_dot(entry)
        if dot is None:
            parts[entry] = f"{entry}:{vector[entry]}"
        else:
            parts[dot[0]] = parts.get(dot[0], f"{dot[0]}:0") + f"+{dot[1]}"
    return "{" + ", ".join(parts[actor] for actor in sorted(parts)) + "}"


def _show_order(entry: str) -> tuple[str, int]:
    dot = cloud_dot(entry)
    return (entry, 0) if dot is None else dot
