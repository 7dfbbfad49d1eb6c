"""Wall-clock moments a person names (`restore NAME until=TIME`): parsing and showing them.

Accepted: ISO 8601 (`2026-12-04T17:45:03`, with a zone or as local time), a time of day today in
local time (`17:45`, `17:45:03`, `17:45:03.250`), Unix seconds (`@1733334303.5`), or a moment
relative to now (`now`, `now-30s`, `now-5m`): the one form a script or a doc example can give
without knowing when it will run.
"""

from __future__ import annotations

import datetime as dt
import re

from bhandar_cli.core.model.durations import seconds_of
from bhandar_cli.core.model.errors import BadInput

_TIME_OF_DAY = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2})(\.\d+)?)?$")


def parse_moment(text: str, now: float) -> float:
    """Unix seconds of `text`; `now` (Unix seconds) gives today's date for a time of day."""
    raw = text.strip()
    try:
        if raw.startswith("@"):
            return float(raw[1:])
        if raw.lower().startswith("now"):
            rest = raw[3:].strip()
            if not rest:
                return now
            ago = seconds_of(rest[1:].strip()) if rest[0] == "-" else None
            if ago is not None and ago != float("inf"):
                return now - ago
        match = _TIME_OF_DAY.match(raw)
        if match:
            hour, minute, second, frac = match.groups()
            today = dt.datetime.fromtimestamp(now).astimezone()
            moment = today.replace(
                hour=int(hour),
                minute=int(minute),
                second=int(second or 0),
                microsecond=round(float(frac or 0) * 1_000_000),
            )
            return moment.timestamp()
        parsed = dt.datetime.fromisoformat(raw)
        if parsed.tzinfo is None:
            parsed = parsed.astimezone()  # local time, as a time of day is
        return parsed.timestamp()
    except ValueError:
        pass
    raise BadInput(
        f"bad time {text!r}: use ISO 8601 (2026-12-04T17:45:03), a time of day today "
        "(17:45:03, local time), Unix seconds (@1733334303.5) or now, now-30s"
    )


def show_moment(when: float | None) -> str | None:
    """ISO 8601 in local time with its offset, to the millisecond (None stays None)."""
    if when is None:
        return None
    return dt.datetime.fromtimestamp(when).astimezone().isoformat(timespec="milliseconds")
