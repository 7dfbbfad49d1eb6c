"""How counts read in messages: "1 reply", "2 replies", never "1 replies" or "reply(s)"."""

from __future__ import annotations


def count(n: int, singular: str, plural: str | None = None) -> str:
    """`n` and the word in the number it takes: count(1, "ack") -> "1 ack", count(2, "reply",
    "replies") -> "2 replies"."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
