"""What client operations return: plain dataclasses with the JSON shapes the man page lists under JSON OUTPUT.

The faces (REPL, CLI) render these as a table or as JSON (exit_status.py's `OutputFormat`);
`to_json()` gives the stable machine form (fields may be added, the documented ones stay).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from bhandar_cli.core.model import PNCounter, Record, Sibling, TraceSteps, Versioned, decode_value


@dataclass(frozen=True, kw_only=True)
class SiblingView:
    """One sibling as the faces show it: its value, its dot and its clock (the context its write
    carried, plus the dot; the context alone says which other writes it had seen)."""

    value: Any
    dot: tuple[str, int]
    clock: dict[str, int]
    tombstone: bool
    ts: float
    ctype: str
    raw: bytes | None
    context: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, s: Sibling) -> SiblingView:
        value = decode_value(s.value, s.ctype)
        return cls(
            value=value,
            dot=s.dot,
            clock=s.clock,
            tombstone=s.tombstone,
            ts=s.ts,
            ctype=s.ctype,
            raw=s.value,
            context=dict(s.context),
        )

    def saw(self, other: SiblingView) -> bool:
        """Whether this sibling's write had seen `other` (its context covers the other's dot)."""
        return self.context.get(other.dot[0], 0) >= other.dot[1]

    @property
    def expired(self) -> bool:
        """A tombstone left by a time to live, not by a delete: expiry keeps the value's dot, time
        and content type (core/roles/expiry.py), a delete writes none."""
        return self.tombstone and bool(self.ctype)

    def to_json(self) -> dict[str, Any]:
        out = {
            "dot": list(self.dot),
            "clock": self.clock,
            "context": self.context,  # what the write had seen: the clock without its own dot
            "value": self.value,
            "tombstone": self.tombstone,
            "ts": round(self.ts, 6),
        }
        if self.expired:
            out["expired"] = True
        return out


def sibling_views(record: Record | None) -> list[SiblingView]:
    if isinstance(record, Versioned):
        return [SiblingView.of(s) for s in record.siblings]
    return []


@dataclass(frozen=True, kw_only=True)
class GetOutcome:
    """What a get found: the siblings (or a counter's value), the context to write back with."""

    keyspace: str
    key: str
    found: bool
    siblings: list[SiblingView]
    context: str
    coordinator: str
    replies: int
    needed: int
    counter: int | None = None
    counter_entries: dict[str, tuple[int, int]] = field(default_factory=dict)
    trace: TraceSteps = ()
    dropped: list[SiblingView] = field(default_factory=list)  # lww: concurrent versions thrown away
    duplicates: int = 0  # counters: increments applied twice (retries) that the value counts once
    warnings: tuple[str, ...] = ()  # e.g. merges left the key over the sibling limit

    @property
    def values(self) -> list[Any]:
        if self.counter is not None:
            return [self.counter]
        return [s.value for s in self.siblings if not s.tombstone]

    @property
    def concurrent_pairs(self) -> list[tuple[SiblingView, SiblingView]]:
        live = [s for s in self.siblings if not s.tombstone]
        # By dots, not by clocks: a write made without a context (or with an old one) has a clock
        # that can look later than a sibling it never saw, {A:2} beside {A:1}.
        return [(a, b) for i, a in enumerate(live) for b in live[i + 1 :] if not a.saw(b) and not b.saw(a)]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cmd": "get",
            "ok": True,
            "keyspace": self.keyspace,
            "key": self.key,
            "found": self.found,
            "values": self.values,
            "context": self.context,
            "siblings": len([s for s in self.siblings if not s.tombstone]) if self.counter is None else 1,
            "tombstones": len([s for s in self.siblings if s.tombstone]),
            "expired": len([s for s in self.siblings if s.expired]),
            "coordinator": self.coordinator,
            "replies": self.replies,
            "versions": [s.to_json() for s in self.siblings],
        }
        if self.counter is not None:
            out["counter"] = {a: {"p": p, "n": n} for a, (p, n) in self.counter_entries.items()}
            out["duplicates"] = self.duplicates
        if self.dropped:
            out["dropped"] = [s.to_json() for s in self.dropped]
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.trace:
            out["trace"] = [list(step) for step in self.trace]
        return out


def counter_parts(record: Record | None) -> tuple[int, dict[str, tuple[int, int]]]:
    if isinstance(record, PNCounter):
        return record.value, record.entries()
    return 0, {}


@dataclass(frozen=True, kw_only=True)
class WriteOutcome:
    """What a put or delete did: its coordinator, the acknowledgements and the context it used."""

    cmd: str  # put or delete
    keyspace: str
    key: str
    coordinator: str
    acks: int
    needed: int
    context_used: str  # "none", "auto", "given" or (a delete that read the key first) "read"
    warnings: tuple[str, ...] = ()
    hinted: tuple[str, ...] = ()
    trace: TraceSteps = ()
    removed: tuple[Any, ...] | None = None  # a delete: the values it read and removed, if known
    forwarded_by: str = ""  # the node asked (via=), when another node coordinated
    note: str = ""  # why it did not coordinate, in its own words (PutResult.forward_reason)

    @property
    def blind(self) -> bool:
        return self.context_used == "none"

    def warned(self, warning: str) -> WriteOutcome:
        """This outcome with one more warning (none when `warning` is empty)."""
        return replace(self, warnings=(*self.warnings, warning)) if warning else self

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cmd": self.cmd,
            "ok": True,
            "keyspace": self.keyspace,
            "key": self.key,
            "coordinator": self.coordinator,
            "acks": self.acks,
            "needed": self.needed,
            "context": self.context_used,
        }
        if self.cmd == "delete":
            out["blind"] = self.blind
            if self.removed is not None:
                out["removed"] = list(self.removed)
        if self.forwarded_by:
            out["forwarded_by"], out["note"] = self.forwarded_by, self.note
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.hinted:
            out["hinted"] = list(self.hinted)
        if self.trace:
            out["trace"] = [list(step) for step in self.trace]
        return out


@dataclass(frozen=True, kw_only=True)
class IncrOutcome:
    """What an increment did: the counter's value after it and the acknowledgements."""

    keyspace: str
    key: str
    value: int
    request_id: str
    coordinator: str
    acks: int
    needed: int
    trace: TraceSteps = ()
    forwarded_by: str = ""  # as WriteOutcome's
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cmd": "incr",
            "ok": True,
            "keyspace": self.keyspace,
            "key": self.key,
            "value": self.value,
            "request_id": self.request_id,
            "coordinator": self.coordinator,
            "acks": self.acks,
        }
        if self.forwarded_by:
            out["forwarded_by"], out["note"] = self.forwarded_by, self.note
        if self.trace:
            out["trace"] = [list(step) for step in self.trace]
        return out
