"""Durations as people type them, in one place: `500ms`, `2s`, `1.5` (seconds), `5m`, `2h`, `1d`.

The REPL's sleeps and waits, a keyspace's ttl, a join token's lifetime and the time-valued keys of
`config set` all read them here; each caller keeps its own bounds and its own words for an error.
"""

from __future__ import annotations

import re

UNITS: dict[str, float] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(" + "|".join(sorted(UNITS, key=len, reverse=True)) + r")?\s*")


def seconds_of(text: str) -> float | None:
    """The seconds `text` says, or None when it is not a duration (a bare number is seconds). It
    can be infinite (float() of 400 nines is): every caller checks its own upper bound."""
    match = _DURATION.fullmatch(text.lower())
    if match is None:
        return None
    return float(match.group(1)) * UNITS[match.group(2) or "s"]
