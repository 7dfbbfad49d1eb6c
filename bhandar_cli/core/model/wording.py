"""How counts and moments read in messages: "1 reply", "2 replies", never "1 replies" or
"reply(s)"; a node's time as a date, not as a number of seconds since 1970."""

from __future__ import annotations

from datetime import UTC, datetime

VIRTUAL = 1e9  # node time below this is a virtual clock's (seconds since its start)


def count(n: int, singular: str, plural: str | None = None) -> str:
    """`n` and the word in the number it takes: count(1, "ack") -> "1 ack", count(2, "reply",
    "replies") -> "2 replies"."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def moment(now: float) -> str:
    """Node time as a person reads it: `2026-12-04 17:45:03 UTC` (the core knows no time zone),
    or `12.5 s of virtual time` under a virtual clock."""
    if now < VIRTUAL:
        return f"{now:.1f} s of virtual time"
    # datetime, not the time module: converting a given number reads no clock, and the core
    # imports nothing that could (tests/core/test_layout.py)
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
