"""How a node logs the connections it refuses, evicts or finds cut: at most one line per source
per interval, with a count, so a flood from one address cannot turn the log into the flood.

Every refusal used to log a warning of its own: one local client churning connections wrote
15.9 MB in 30 s and spent most of a core formatting them. A `RefusalLog` logs the first refusal
from a source (an address, without its port) at once, as before, then only counts that source's
refusals until its interval is over; the next refusal from anyone after that logs one line per
source that had more, e.g. "refused 412 more connections from 127.0.0.1 within 10 s of the first (412
evicted before their hello); the last: ...". At most `MAX_SOURCES` sources are told apart in an
interval; more are counted together as "other sources" (an attacker with many addresses still
costs a bounded number of lines).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

INTERVAL = 10.0  # seconds between two lines about one source
MAX_SOURCES = 64  # sources told apart within one interval
OTHERS = "other sources"


@dataclass
class _Tally:
    """What one source was refused since its last line."""

    kinds: Counter[str] = field(default_factory=Counter)
    last: str = ""


def source_of(peer: str) -> str:
    """The address of "host:port" (or "[v6]:port"), without the port: a flood churns ports."""
    host, sep, port = peer.rpartition(":")
    return host.strip("[]") if sep and port.isdigit() else peer


class RefusalLog:
    """Rate-limited warnings about refused connections, written to `log`."""

    def __init__(
        self,
        log: logging.Logger,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        max_sources: int = MAX_SOURCES,
    ) -> None:
        self.log = log
        self.interval = interval
        self.clock = clock
        self.max_sources = max_sources
        self._window_start = -float("inf")
        self._tallies: dict[str, _Tally] = {}  # sources heard from in this window

    def refused(self, peer: str, kind: str, message: str) -> None:
        """Note one refused connection from `peer` ("host:port"): `kind` names it in the count
        ("evicted before their hello"), `message` is the whole sentence of the first or last one."""
        now = self.clock()
        if now - self._window_start >= self.interval:
            self.flush()
            self._window_start = now
        source = source_of(peer)
        tally = self._tallies.get(source)
        if tally is None:
            if len(self._tallies) >= self.max_sources:
                source = OTHERS
                tally = self._tallies.get(OTHERS)
            if tally is None:
                # The first from this source in the window: said at once, in full.
                self._tallies[source] = _Tally()
                self.log.warning("%s", message)
                return
        tally.kinds[kind] += 1
        tally.last = message

    def flush(self) -> None:
        """One line per source with refusals not yet logged; the window starts again."""
        tallies, self._tallies = self._tallies, {}
        for source, tally in tallies.items():
            total = sum(tally.kinds.values())
            if not total:
                continue
            kinds = ", ".join(f"{count} {kind}" for kind, count in tally.kinds.most_common())
            self.log.warning(
                "refused %d more connection%s from %s within %g s of the first (%s); the last: %s",
                total,
                "" if total == 1 else "s",
                source,
                self.interval,
                kinds,
                tally.last,
            )
