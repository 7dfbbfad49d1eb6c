"""What a history reveals about write identity: which dot each written value got, and when a
later write superseded it.

Clients learn a write's dot only by reading it back, and a write supersedes another only through
a context that covers its dot (contexts come only from reads). `learn_dots` gathers value -> dot
from every record a client read and every final record, and checks that one dot always names one
write; `superseded_at` finds, per put, the earliest invocation of a write whose context covered
its dot. The checker's lost-write, stale-read and resurrection properties rest on both. And how
every finding names a dot and a value (`dot_text`, `show_value`: one wording in every violation).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping

from bhandar_cli.core.model import NOT_APPLIED, Dot, Record, Versioned, cloud_entry
from bhandar_cli.sim import History, Operation, Violation


def dot_text(dot: Dot) -> str:
    return f"{dot[0]}:{dot[1]}"


def show_value(value: bytes | None) -> str:
    """A value as the workload wrote it (its values are text), or `tombstone`."""
    return "tombstone" if value is None else value.decode("utf-8", "replace")


def _records_seen(
    history: History, final: Mapping[tuple[str, str], Record | None]
) -> Iterable[tuple[str, str, Versioned]]:
    for op in history.ops:
        if op.kind == "get" and op.ok and isinstance(op.record, Versioned):
            yield op.keyspace, op.key, op.record
    for (ks, key), record in final.items():
        if isinstance(record, Versioned):
            yield ks, key, record


def learn_dots(
    history: History, final: Mapping[tuple[str, str], Record | None]
) -> tuple[dict[bytes, Dot], list[Violation], set[bytes], dict[bytes, set[Dot]]]:
    """value -> dot for every value seen (the first dot it was seen under); violations where one
    dot named two different writes; the values stored twice (one put under two dots, each with the
    put's context: a request the network duplicated and a coordinator took twice, having restarted
    in between and forgotten the first); and every dot each value was seen under. Voids are
    nobody's write and are passed over."""
    dot_of: dict[bytes, Dot] = {}
    dots_of_value: dict[bytes, set[Dot]] = {}
    context_of_value: dict[bytes, Mapping[str, int]] = {}
    seen: dict[tuple[str, str, Dot], tuple[bytes | None, tuple[tuple[str, int], ...]]] = {}
    violations: list[Violation] = []
    twice: set[bytes] = set()
    # The same sibling object comes back in many reads (and the history holds every one of them
    # meanwhile, so an id names one sibling throughout): its identity is worked out once.
    idents: dict[int, tuple[bytes | None, tuple[tuple[str, int], ...]]] = {}
    for ks, key, record in _records_seen(history, final):
        for s in record.siblings:
            if s.void:
                continue
            ident = idents.get(id(s))
            if ident is None:
                ident = idents[id(s)] = (s.value, tuple(sorted(s.context.items())))
            slot = (ks, key, s.dot)
            first = seen.setdefault(slot, ident)
            if first != ident:
                violations.append(
                    Violation("dot_reused", ks, key, f"dot {dot_text(s.dot)} names two different writes")
                )
                seen[slot] = ident  # report each change once, not on every later read
            if s.value is None:
                continue
            dots_of_value.setdefault(s.value, set()).add(s.dot)
            known = dot_of.setdefault(s.value, s.dot)
            if known == s.dot:
                context_of_value.setdefault(s.value, s.context)
            elif context_of_value.get(s.value) == s.context:
                twice.add(s.value)
            else:
                seen_as = f"{dot_text(known)} and {dot_text(s.dot)}"
                detail = f"value {show_value(s.value)} seen under dots {seen_as}"
                violations.append(Violation("dot_reused", ks, key, detail))
    return dot_of, violations, twice, dots_of_value


def superseded_at(writes: list[Operation], dot_of: Mapping[bytes, Dot]) -> dict[int, float]:
    """op index -> the earliest invocation of a write whose context covered its dot.

    Only writes that may have been applied count; puts of the key whose dot nobody ever saw have
    no entry (nothing can have covered them).
    """
    appliable = sorted(
        (op for op in writes if op.context and not (op.outcome == "fail" and op.code in NOT_APPLIED)),
        key=lambda op: op.invoked,
    )
    # Per context entry (an actor's counter, or one exact dot of the cloud: versions.py): the
    # invocation times and running maximum counter, so "first time some context covered (actor,
    # n)" is one binary search per entry that could cover it.
    per_entry: dict[str, tuple[list[float], list[int]]] = {}
    for op in appliable:
        assert op.context is not None
        for entry, counter in op.context.items():
            times, tops = per_entry.setdefault(entry, ([], []))
            if not tops or counter > tops[-1]:
                times.append(op.invoked)
                tops.append(counter)
    out: dict[int, float] = {}
    for op in writes:
        if op.kind != "put" or op.value is None:
            continue
        dot = dot_of.get(op.value)
        if dot is None:
            continue
        first = [
            t
            for t in (_first(per_entry.get(dot[0]), dot[1]), _first(per_entry.get(cloud_entry(dot)), dot[1]))
        ]
        covered = [t for t in first if t is not None]
        if covered:
            out[op.index] = min(covered)
    return out


def _first(entry: tuple[list[float], list[int]] | None, counter: int) -> float | None:
    if entry is None:
        return None
    times, tops = entry
    i = bisect_left(tops, counter)
    return times[i] if i < len(tops) else None
